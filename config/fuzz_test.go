package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, every error has a text, the result does
// not depend on map order, a config Parse accepts passes Validate again,
// and the secrets of the fuzz environment never appear in an error.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("servers:\n  a: &a {command: x, env: {K: '${TOKEN}'}}\n  b: {<<: *a, args: [$${x}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lookup := testEnv("N", "12", "B", "true")
		cfg, err := Parse(data, lookup)
		if err != nil {
			msg := err.Error()
			if strings.TrimSpace(msg) == "" {
				t.Fatalf("empty error text for %q", data)
			}
			if strings.Contains(msg, testSecret) {
				t.Fatalf("error shows the secret: %s", msg)
			}
			_, err2 := Parse(data, lookup)
			if err2 == nil || err2.Error() != msg {
				t.Fatalf("Parse is not deterministic:\n%v\n---\n%v", err, err2)
			}
		} else if verr := cfg.Validate(); verr != nil {
			t.Fatalf("Parse accepted a config that Validate rejects: %v", verr)
		}
		if cfg != nil {
			out, merr := cfg.MarshalRedacted()
			if merr != nil {
				t.Fatalf("MarshalRedacted: %v", merr)
			}
			if strings.Contains(string(out), testSecret) {
				t.Fatalf("MarshalRedacted shows the secret:\n%s", out)
			}
			_ = cfg.Warnings()
		}
	})
}

// FuzzExpand: expand never panics, text without "${" is unchanged, and
// escapeLiteral is its exact inverse.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"", "${A}", "$${A}", "$$${A}", "${env:A}", "${", "}${", "a$b", "${A${B}}", "${1}", "$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lookup := func(name string) (string, bool) { return "<" + name + ">", name != "MISSING" }
		got, errs := expand(s, lookup)
		if !strings.Contains(s, "${") && (got != s || errs != nil) {
			t.Fatalf("expand(%q) = %q, %v; want it unchanged", s, got, errs)
		}
		for _, err := range errs {
			if err.Error() == "" {
				t.Fatal("empty error text")
			}
		}
		back, errs := expand(escapeLiteral(s), lookup)
		if errs != nil || back != s {
			t.Fatalf("expand(escapeLiteral(%q)) = %q, %v", s, back, errs)
		}
	})
}

// FuzzImportJSON: ImportJSON never panics, and whatever it produces loads
// without errors.
func FuzzImportJSON(f *testing.F) {
	files, _ := filepath.Glob("testdata/import/*.json")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"servers": {"a b": {"command": "x", "args": ["${", "$${y}"], "env": {"k": "\u0085"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := ImportJSON(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error text")
			}
			return
		}
		if _, err := Parse(out, importCheckEnv); err != nil {
			t.Fatalf("import output does not load: %v\ninput: %q\noutput:\n%s", err, data, out)
		}
	})
}

// FuzzImportFields builds host configs from arbitrary names and values, so
// the fuzzer reaches the conversion instead of JSON syntax errors: the
// output must load, and values without "${" must come back unchanged.
func FuzzImportFields(f *testing.F) {
	f.Add("My Server", "npx", "-y", "API_KEY", "sk-123", "", "", "")
	f.Add("web", "", "", "", "", "https://example.com/mcp", "Authorization", "Bearer ${TOKEN}")
	f.Add("a__b", "c", "${workspaceFolder}", "K", "$${x}", "", "", "")
	f.Fuzz(func(t *testing.T, name, command, arg, envKey, envVal, url, hdrKey, hdrVal string) {
		entry := map[string]any{}
		if command != "" {
			entry["command"] = command
			entry["args"] = []string{arg}
			entry["env"] = map[string]string{envKey: envVal}
		}
		if url != "" {
			entry["url"] = url
			entry["headers"] = map[string]string{hdrKey: hdrVal}
		}
		data, err := json.Marshal(map[string]any{"mcpServers": map[string]any{name: entry}})
		if err != nil {
			t.Fatalf("marshal the generated import: %v", err) // strings always marshal
		}
		out, err := ImportJSON(data)
		if err != nil {
			t.Fatalf("ImportJSON: %v", err)
		}
		cfg, err := Parse(out, importCheckEnv)
		if err != nil {
			t.Fatalf("import output does not load: %v\n%s", err, out)
		}
		if len(cfg.Servers) != 1 {
			return // skipped, with a comment
		}
		for _, s := range cfg.Servers {
			if !strings.Contains(command, "${") && command != "" && s.Command != viaJSON(t, command) {
				t.Fatalf("command %q came back as %q", command, s.Command)
			}
			if !strings.Contains(envVal, "${") && command != "" && s.Env[viaJSON(t, envKey)] != viaJSON(t, envVal) {
				t.Fatalf("env value %q came back as %q", envVal, s.Env[viaJSON(t, envKey)])
			}
		}
	})
}

// viaJSON is s as a JSON document carries it: encoding/json writes each
// byte of invalid UTF-8 as its own U+FFFD, so that is what an import reads.
func viaJSON(t *testing.T, s string) string {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
