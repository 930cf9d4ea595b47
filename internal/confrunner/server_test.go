package confrunner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadServerResults(t *testing.T) {
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
		got, err := ReadServerResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || !got["ping"].Passed() || got["tools-call-with-logging"].Passed() || !got["server-sse-polling"].Passed() {
			t.Fatalf("unexpected results: %+v", got)
		}
		if p := got["tools-call-with-logging"].Problems(); !strings.Contains(p, "WARNING b: late") {
			t.Fatalf("problems = %q", p)
		}
		run := &ServerRun{Scenarios: got}
		if names := strings.Join(run.Names(), " "); names != "ping server-sse-polling tools-call-with-logging" {
			t.Fatalf("Names() = %s", names)
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
			if _, err := ReadServerResults(dir); err == nil || !strings.Contains(err.Error(), "unexpected entry") {
				t.Fatalf("err = %v, want an unexpected entry error", err)
			}
		})
	}
	t.Run("bad json", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "server-ping-2026-11-29T15-21-50-720Z", `{`)
		if _, err := ReadServerResults(dir); err == nil {
			t.Fatal("no error for a broken checks.json")
		}
	})
}
