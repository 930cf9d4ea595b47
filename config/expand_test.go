package config

import (
	"errors"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	lookup := testEnv("EMPTY", "", "NESTED", "${TOKEN}", "PORT", "8080")
	tests := []struct {
		name, in, want, err string
	}{
		{"plain", "npx", "npx", ""},
		{"var", "${HOME}/bin", "/home/test/bin", ""},
		{"env form", "${env:HOME}/bin", "/home/test/bin", ""},
		{"two", "${PORT}:${PORT}", "8080:8080", ""},
		{"empty value", "a${EMPTY}b", "ab", ""},
		{"escape", "$${HOME}", "${HOME}", ""},
		{"escape then var", "$${HOME}=${PORT}", "${HOME}=8080", ""},
		{"dollar before escape", "$$${HOME}", "$${HOME}", ""},
		{"lone dollars", "$a $$ $ $}", "$a $$ $ $}", ""},
		{"brace without dollar", "{HOME}", "{HOME}", ""},
		{"no re-expansion", "${NESTED}", "${TOKEN}", ""},
		{"missing", "Bearer ${NOPE}", "", "environment variable NOPE is not set"},
		{"missing env form", "${env:NOPE}", "", "environment variable NOPE is not set"},
		{"all missing", "${A1}${A2}", "", "environment variable A1 is not set\nenvironment variable A2 is not set"},
		{"unterminated", "${HOME", "", "unterminated ${ (write $${ for a literal ${)"},
		{"empty name", "${}", "", "empty variable name in ${}"},
		{"empty env name", "${env:}", "", "empty variable name in ${}"},
		{"digit first", "${1A}", "", "invalid variable name in ${...}: use letters, digits and _, not starting with a digit"},
		{"dash", "${MY-VAR}", "", "invalid variable name in ${...}: use letters, digits and _, not starting with a digit"},
		{"default syntax", "${A:-b}", "", "invalid variable name in ${...}: use letters, digits and _, not starting with a digit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := expand(tt.in, lookup)
			if gotErr := errors.Join(errs...); tt.err != "" {
				if gotErr == nil || gotErr.Error() != tt.err {
					t.Fatalf("expand(%q) error = %v, want %q", tt.in, gotErr, tt.err)
				}
				return
			} else if gotErr != nil {
				t.Fatalf("expand(%q): %v", tt.in, gotErr)
			}
			if got != tt.want {
				t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestExpandInDocuments(t *testing.T) {
	lookup := testEnv("LIMIT", "5000", "ON", "false", "EMPTY", "", "NULLISH", "null", "NAME", "files", "BAD", "soon")
	t.Run("typed by text", func(t *testing.T) {
		doc := "enabled: ${ON}\nservers:\n  a:\n    command: ${NULLISH}\n    max_response_bytes: ${LIMIT}\n    cwd: \"${EMPTY}\"\n    args: ['${HOME}', '$${HOME}']\n"
		cfg, err := Parse([]byte(doc), lookup)
		if err != nil {
			t.Fatal(err)
		}
		a := cfg.Servers["a"]
		if cfg.IsEnabled() || a.Command != "null" || a.MaxResponseBytes != 5000 || a.Cwd != "" ||
			a.Args[0] != "/home/test" || a.Args[1] != "${HOME}" {
			t.Errorf("got enabled=%v %+v", cfg.IsEnabled(), a)
		}
	})
	t.Run("keys are not expanded", func(t *testing.T) {
		cfg, err := Parse([]byte("servers:\n  a:\n    command: x\n    env:\n      ${NAME}: v\n"), lookup)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Servers["a"].Env["${NAME}"] != "v" {
			t.Errorf("env = %v", cfg.Servers["a"].Env)
		}
	})
	t.Run("empty variable is not an absent key", func(t *testing.T) {
		_, err := Parse([]byte("servers:\n  a:\n    command: x\n    enabled: ${EMPTY}\n"), lookup)
		want := "servers.a.enabled: expected true or false, got a value from the environment (not shown)"
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v, want %q", err, want)
		}
	})
	t.Run("bad values from the environment are not shown", func(t *testing.T) {
		_, err := Parse([]byte("servers:\n  a:\n    command: x\n    timeout: ${BAD}\n    max_response_bytes: ${BAD}\n"), lookup)
		want := lines(
			"servers.a.timeout: invalid value (it comes from the environment and is not shown)",
			"servers.a.max_response_bytes: expected a whole number, got a value from the environment (not shown)",
		)
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v, want %q", err, want)
		}
	})
	t.Run("every missing variable at once", func(t *testing.T) {
		doc := "servers:\n  a:\n    url: https://${HOST}/mcp\n    headers:\n      Authorization: Bearer ${API_TOKEN}\n  b:\n    command: ${CMD}\n"
		_, err := Parse([]byte(doc), lookup)
		want := lines(
			"servers.a.url: environment variable HOST is not set",
			"servers.a.headers.Authorization: environment variable API_TOKEN is not set",
			"servers.b.command: environment variable CMD is not set",
		)
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v, want %q", err, want)
		}
	})
	t.Run("anchors expand once", func(t *testing.T) {
		doc := "servers:\n  a:\n    command: x\n    args: [&h '$${HOME}', *h]\n"
		cfg, err := Parse([]byte(doc), lookup)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cfg.Servers["a"].Args, ","); got != "${HOME},${HOME}" {
			t.Errorf("args = %s", got)
		}
	})
}
