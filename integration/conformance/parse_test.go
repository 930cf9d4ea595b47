package conformance

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseExpectedFailures(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []expectedFailure
		wantErr string // substring; "" means no error
	}{
		{name: "empty file", in: "", want: nil},
		{name: "empty list", in: "server: []\n", want: nil},
		{name: "null list", in: "server:\n", want: nil},
		{
			name: "comment above and at the end of the line",
			in:   "server:\n  # first reason,\n  # second line\n  - a\n  - b # inline reason\n",
			want: []expectedFailure{{"a", "first reason, second line"}, {"b", "inline reason"}},
		},
		{
			name:    "entry without a comment",
			in:      "server:\n  # why a\n  - a\n  - b\n",
			wantErr: "line 4: b has no comment",
		},
		{
			name:    "comment on the key only",
			in:      "# about the list\nserver:\n  - a\n",
			wantErr: "a has no comment",
		},
		{name: "client key", in: "client:\n  - x # y\n", wantErr: `unknown key "client"`},
		{name: "not a list", in: "server: resources-read-text\n", wantErr: "must be a list"},
		{name: "not a mapping", in: "- a # b\n", wantErr: "want a mapping"},
		{name: "duplicate", in: "server:\n  - a # one\n  - a # two\n", wantErr: "a is listed twice"},
		{name: "number entry", in: "server:\n  - 12 # why\n", wantErr: "non-empty string"},
		{name: "nested list entry", in: "server:\n  - [a] # why\n", wantErr: "non-empty string"},
		{name: "broken yaml", in: "server: [a\n", wantErr: "invalid expected-failures file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseExpectedFailures([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errBadExpected) {
					t.Fatalf("err = %v, want errBadExpected containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestExpectedFailuresFileIsValid checks the committed file on its own, so
// that a bad edit is reported even where the runner is not installed.
func TestExpectedFailuresFileIsValid(t *testing.T) {
	list, err := loadExpectedFailures(expectedFailuresFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		t.Logf("expected failure %s: %s", e.scenario, e.reason)
	}
}

func TestNodeMajor(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"v20.20.2", 20, true},
		{"v22.23.3", 22, true},
		{"v24.0.0-nightly", 24, true},
		{"20.1.0", 20, true},
		{"", 0, false},
		{"vX.1", 0, false},
		{"v0.12.0", 0, false},
	}
	for _, tt := range tests {
		got, err := nodeMajor(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("nodeMajor(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestWithNodeImport(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		path    string
		want    []string
		wantErr bool
	}{
		{
			name: "no NODE_OPTIONS",
			env:  []string{"A=1"},
			path: "/x/register.mjs",
			want: []string{"A=1", `NODE_OPTIONS=--import "/x/register.mjs"`},
		},
		{
			name: "existing NODE_OPTIONS kept first",
			env:  []string{"NODE_OPTIONS=--max-old-space-size=512", "B=2"},
			path: "/a b/register.mjs",
			want: []string{"B=2", `NODE_OPTIONS=--max-old-space-size=512 --import "/a b/register.mjs"`},
		},
		{name: "quote in path", env: nil, path: `/x"y/register.mjs`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withNodeImport(tt.env, tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadResults(t *testing.T) {
	write := func(t *testing.T, dir, name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "checks.json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("ok", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "server-ping-2026-11-29T15-21-50-720Z", `[{"id":"ping","status":"SUCCESS"}]`)
		write(t, dir, "server-tools-call-with-logging-2026-11-29T15-21-50-721Z",
			`[{"id":"a","status":"SUCCESS"},{"id":"b","status":"WARNING","errorMessage":"late"}]`)
		write(t, dir, "server-server-sse-polling-2026-11-29T15-21-50-722Z", `[{"id":"c","status":"INFO"}]`)
		got, err := readResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || !got["ping"].passed() || got["tools-call-with-logging"].passed() || !got["server-sse-polling"].passed() {
			t.Fatalf("unexpected results: %+v", got)
		}
		if p := got["tools-call-with-logging"].problems(); !strings.Contains(p, "WARNING b: late") {
			t.Fatalf("problems = %q", p)
		}
	})
	for name, entry := range map[string]string{
		"stray entry":      "notes.txt",
		"no timestamp":     "server-ping",
		"client-side name": "ping-2026-11-29T15-21-50-720Z",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, entry, `[]`)
			if _, err := readResults(dir); err == nil || !strings.Contains(err.Error(), "unexpected entry") {
				t.Fatalf("err = %v, want an unexpected entry error", err)
			}
		})
	}
	t.Run("bad json", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "server-ping-2026-11-29T15-21-50-720Z", `{`)
		if _, err := readResults(dir); err == nil {
			t.Fatal("no error for a broken checks.json")
		}
	})
}
