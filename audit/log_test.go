package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

func auditConfig(dir string, mode string) config.Audit {
	return config.Audit{Path: filepath.Join(dir, "audit.log"), MaxBytes: config.DefaultAuditMaxBytes, MaxFiles: 3, Arguments: mode}
}

func openLog(t *testing.T, cfg config.Audit, opts Options) *Log {
	t.Helper()
	l, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

// readLines closes l and returns the decoded lines of path.
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func closeLog(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLineFormat(t *testing.T) {
	dir := t.TempDir()
	cfg := auditConfig(dir, "digest")
	l := openLog(t, cfg, Options{})
	at := time.Date(2026, 11, 30, 9, 15, 2, 123456789, time.FixedZone("CET", 3600))
	l.Record(Entry{Time: at, Agent: "assistant", Session: "3f2a", Token: 2, Method: "tools/call",
		Target: "github__create_issue", Server: "github", Decision: DecisionAllow, Approval: "approve", Outcome: "ok",
		Duration: 412345 * time.Microsecond, Arguments: json.RawMessage(`{"title": "Bug", "labels": ["x"]}`),
		RequestID: json.RawMessage(`7`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"})
	l.Record(Entry{Time: at, Agent: "assistant", Subject: "alice@example.com", Method: "resources/read",
		Target: "files+file:///srv/a.txt?sig=abc", Decision: DecisionDeny, Rule: "not_granted", RequestID: json.RawMessage(`"r-1"`)})
	closeLog(t, l)
	data, _ := os.ReadFile(cfg.Path)
	sum := sha256.Sum256([]byte(`{"title":"Bug","labels":["x"]}`))
	want := `{"time":"2026-11-30T08:15:02.123456Z","agent":"assistant","session":"3f2a","client":"assistant","auth":"token","token_position":2,` +
		`"method":"tools/call","target":"github__create_issue","server":"github","decision":"allow","approval":"approve","outcome":"ok",` +
		`"duration_ms":412.345,"arguments_sha256":"` + hex.EncodeToString(sum[:]) + `","request_id":7,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}` + "\n" +
		`{"time":"2026-11-30T08:15:02.123456Z","agent":"assistant","client":"alice@example.com","auth":"oauth",` +
		`"method":"resources/read","target":"files+file:///srv/a.txt","decision":"deny","rule":"not_granted","duration_ms":0,"request_id":"r-1"}` + "\n"
	if string(data) != want {
		t.Errorf("file\n got: %s\nwant: %s", data, want)
	}
	st, err := os.Stat(cfg.Path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v; want 0600", st.Mode(), err)
	}
}

func TestArgumentModes(t *testing.T) {
	args := json.RawMessage(`{ "path": "/tmp/x", "n": 1.50 }`)
	sum := sha256.Sum256([]byte(`{"path":"/tmp/x","n":1.50}`))
	digest := hex.EncodeToString(sum[:])
	big := json.RawMessage(`{"s":"` + strings.Repeat("a", MaxFullArguments) + `"}`)
	tests := []struct {
		mode string
		args json.RawMessage
		want map[string]any // arguments_* members; absent keys must be absent
	}{
		{"digest", args, map[string]any{"arguments_sha256": digest}},
		{"full", args, map[string]any{"arguments_sha256": digest, "arguments": map[string]any{"path": "/tmp/x", "n": 1.5}}},
		{"none", args, map[string]any{}},
		{"digest", nil, map[string]any{}},
		{"full", big, map[string]any{"arguments_sha256": func() string { s := sha256.Sum256(big); return hex.EncodeToString(s[:]) }(), "arguments_omitted": "too_large"}},
		{"digest", json.RawMessage(`{"a":`), map[string]any{"arguments_omitted": "invalid_json"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.mode, len(tt.args)), func(t *testing.T) {
			cfg := auditConfig(t.TempDir(), tt.mode)
			l := openLog(t, cfg, Options{})
			l.Record(Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow, Arguments: tt.args})
			closeLog(t, l)
			lines := readLines(t, cfg.Path)
			if len(lines) != 1 {
				t.Fatalf("%d lines", len(lines))
			}
			for _, k := range []string{"arguments_sha256", "arguments", "arguments_omitted"} {
				got, ok := lines[0][k]
				want, wantOK := tt.want[k]
				if ok != wantOK || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s = %v (present %t), want %v (present %t)", k, got, ok, want, wantOK)
				}
			}
		})
	}
}

func TestRecordCopiesItsInput(t *testing.T) {
	cfg := auditConfig(t.TempDir(), "full")
	l := openLog(t, cfg, Options{})
	args := []byte(`{"k":"before"}`)
	id := []byte(`"id-1"`)
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow, Arguments: args, RequestID: id})
	copy(args, `{"k":"AFTER!"}`)
	copy(id, `"id-X"`)
	closeLog(t, l)
	line := readLines(t, cfg.Path)[0]
	if fmt.Sprint(line["arguments"]) != "map[k:before]" || line["request_id"] != "id-1" {
		t.Errorf("line %v; Record must copy the bytes it keeps", line)
	}
}

func TestSecretsNeverWritten(t *testing.T) {
	const secret = "ghs_0123456789abcdefSECRET"
	const envSecret = "plain-config-value-42"
	cfg := auditConfig(t.TempDir(), "full")
	l := openLog(t, cfg, Options{Secrets: []string{secret, envSecret}})
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow, Outcome: "error",
		Arguments: json.RawMessage(`{"note":"uses ` + envSecret + `","password":"hunter2-hunter2","header":"Bearer abcdefghijkl","nested":{"api_key":"k-123456789"}}`),
		Error:     "upstream said: token " + secret + " rejected"})
	l.Record(Entry{Agent: "a", Method: "resources/read", Target: "https://h/x?access_token=" + secret, Decision: DecisionAllow})
	closeLog(t, l)
	data, _ := os.ReadFile(cfg.Path)
	for _, s := range []string{secret, envSecret, "hunter2-hunter2", "abcdefghijkl", "k-123456789"} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("the file holds %q:\n%s", s, data)
		}
	}
	lines := readLines(t, cfg.Path) // still JSON, one entry per line
	if len(lines) != 2 || !strings.Contains(string(data), "[REDACTED]") {
		t.Errorf("%d lines:\n%s", len(lines), data)
	}
}

// TestHTTPCredentialsNeverWritten: with arguments: full, the credentials
// of every HTTP authentication scheme and the values of credential-shaped
// keys (any case, at any depth, also as numbers, arrays and objects) are
// written as [REDACTED]; the scheme's name and every other value stay.
func TestHTTPCredentialsNeverWritten(t *testing.T) {
	cfg := auditConfig(t.TempDir(), "full")
	l := openLog(t, cfg, Options{})
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow, Arguments: json.RawMessage(`{
		"authorization": "Basic dXNlcjpwYXNz",
		"req": {"headers": {"Proxy-Authorization": "Digest username=\"u\", response=\"6629fae4\"",
			"COOKIE": "sid=s3ss10n", "Set-Cookie": ["sid=s3ss10n; HttpOnly"], "X-Api-Key": "k-998877"}},
		"raw": "GET / HTTP/1.1\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/x, Signature=f00d\r\n",
		"note": "Negotiate YIIGhgYGKwYBBQUCoIIGejCC and ntlm TlRMTVNTUAABAAAAB4IIogAAAA",
		"pin": {"password": 482913}, "limit": 5}`)})
	closeLog(t, l)
	data, _ := os.ReadFile(cfg.Path)
	for _, s := range []string{"dXNlcjpwYXNz", "6629fae4", "s3ss10n", "k-998877", "AKIAEXAMPLE", "f00d", "YIIGhg", "TlRMTVNT", "482913"} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("the file holds %q:\n%s", s, data)
		}
	}
	lines := readLines(t, cfg.Path)
	if len(lines) != 1 {
		t.Fatalf("%d lines:\n%s", len(lines), data)
	}
	got, _ := json.Marshal(lines[0]["arguments"])
	want := `{"authorization":"Basic [REDACTED]","limit":5,"note":"Negotiate [REDACTED] and ntlm [REDACTED]","pin":{"password":"[REDACTED]"},` +
		`"raw":"GET / HTTP/1.1\nAuthorization: AWS4-HMAC-SHA256 [REDACTED]\n",` + // \r: a control character, dropped
		`"req":{"headers":{"COOKIE":"[REDACTED]","Proxy-Authorization":"Digest [REDACTED]","Set-Cookie":"[REDACTED]","X-Api-Key":"[REDACTED]"}}}`
	if string(got) != want {
		t.Errorf("arguments written:\n got %s\nwant %s", got, want)
	}
}

// TestCamelCaseKeysAndProseInArguments: with arguments: full, camelCase
// credential keys and a credential after a JSON-escaped tab are redacted,
// while prose that names an authentication scheme is written whole.
func TestCamelCaseKeysAndProseInArguments(t *testing.T) {
	cfg := auditConfig(t.TempDir(), "full")
	l := openLog(t, cfg, Options{})
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow, Arguments: json.RawMessage(`{
		"accessToken": "at-771122", "clientSecret": "cs-443355", "refreshToken": "rt-990088",
		"privateKey": "pk-665544", "apiKey": "ak-221100", "sessionCookie": "sc-118822",
		"note": "Basic\tdXNlcjpwYXNz",
		"doc": "Digest algorithm=SHA-256 is the default; see the docs",
		"why": "Negotiate authentication-required by the server",
		"keyboard": "us", "tokenizer": "bpe"}`)})
	closeLog(t, l)
	data, _ := os.ReadFile(cfg.Path)
	for _, s := range []string{"at-771122", "cs-443355", "rt-990088", "pk-665544", "ak-221100", "sc-118822", "dXNlcjpwYXNz"} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("the file holds %q:\n%s", s, data)
		}
	}
	lines := readLines(t, cfg.Path)
	if len(lines) != 1 {
		t.Fatalf("%d lines:\n%s", len(lines), data)
	}
	got, _ := json.Marshal(lines[0]["arguments"])
	want := `{"accessToken":"[REDACTED]","apiKey":"[REDACTED]","clientSecret":"[REDACTED]",` +
		`"doc":"Digest algorithm=SHA-256 is the default; see the docs","keyboard":"us",` +
		`"note":"Basic\t[REDACTED]","privateKey":"[REDACTED]","refreshToken":"[REDACTED]","sessionCookie":"[REDACTED]",` +
		`"tokenizer":"bpe","why":"Negotiate authentication-required by the server"}`
	if string(got) != want {
		t.Errorf("arguments written:\n got %s\nwant %s", got, want)
	}
}

// TestBidiControlsEscapedInFile: a bidi control in an argument is written
// as a JSON escape, so that the file shown on a terminal is not reordered,
// and the line still decodes to the arguments as sent.
func TestBidiControlsEscapedInFile(t *testing.T) {
	cfg := auditConfig(t.TempDir(), "full")
	l := openLog(t, cfg, Options{})
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow,
		Arguments: json.RawMessage("{\"path\":\"invoice\u202egpj.exe\",\"dir\":\"\u2066a\u2069\"}")})
	closeLog(t, l)
	data, _ := os.ReadFile(cfg.Path)
	if bytes.Contains(data, []byte("\u202e")) || bytes.Contains(data, []byte("\u2066")) {
		t.Errorf("the file holds a raw bidi control:\n%q", data)
	}
	if !bytes.Contains(data, []byte(`invoice\u202egpj.exe`)) {
		t.Errorf("the file does not hold the escaped control:\n%s", data)
	}
	lines := readLines(t, cfg.Path)
	if len(lines) != 1 {
		t.Fatalf("%d lines:\n%s", len(lines), data)
	}
	args, _ := lines[0]["arguments"].(map[string]any)
	if args["path"] != "invoice\u202egpj.exe" || args["dir"] != "\u2066a\u2069" {
		t.Errorf("arguments decode to %q", args)
	}
}

// TestOrderUnderConcurrency: entries appear in the order Record was
// called, whatever the number of goroutines calling it.
func TestOrderUnderConcurrency(t *testing.T) {
	cfg := auditConfig(t.TempDir(), "digest")
	l := openLog(t, cfg, Options{})
	const workers, each = 8, 300
	var mu sync.Mutex
	seq := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				mu.Lock() // fixes a global order for the check
				seq++
				l.Record(Entry{Agent: "a", Method: "tools/call", Target: fmt.Sprintf("%d", seq), Session: fmt.Sprintf("w%d-%04d", w, i), Decision: DecisionAllow})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	closeLog(t, l)
	lines := readLines(t, cfg.Path)
	if len(lines) != workers*each || l.Dropped() != 0 {
		t.Fatalf("%d lines, %d dropped; want %d and none", len(lines), l.Dropped(), workers*each)
	}
	last := map[string]string{}
	for i, m := range lines {
		if m["target"] != fmt.Sprint(i+1) {
			t.Fatalf("line %d has target %v: out of order", i, m["target"])
		}
		s := m["session"].(string)
		w := s[:strings.IndexByte(s, '-')]
		if s <= last[w] {
			t.Fatalf("worker %s: %s after %s", w, s, last[w])
		}
		last[w] = s
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Audit{Path: filepath.Join(dir, "logs", "audit.log"), MaxBytes: 1024, MaxFiles: 3, Arguments: "none"}
	l := openLog(t, cfg, Options{})
	const n = 60
	for i := range n {
		l.Record(Entry{Agent: "a", Method: "tools/call", Target: fmt.Sprintf("tool_%03d", i), Decision: DecisionAllow})
	}
	closeLog(t, l)
	names, _ := filepath.Glob(cfg.Path + "*")
	if strings.Join(names, " ") != strings.Join([]string{cfg.Path, cfg.Path + ".1", cfg.Path + ".2"}, " ") {
		t.Fatalf("files %q; want the live file and two rotated ones", names)
	}
	st, _ := os.Stat(filepath.Dir(cfg.Path))
	if st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", st.Mode().Perm())
	}
	var targets []string
	for _, name := range []string{cfg.Path + ".2", cfg.Path + ".1", cfg.Path} {
		st, err := os.Stat(name)
		if err != nil || st.Size() > cfg.MaxBytes || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want at most %d bytes, 0600", name, st.Size(), err, cfg.MaxBytes)
		}
		for _, m := range readLines(t, name) {
			targets = append(targets, m["target"].(string))
		}
	}
	// The kept lines are the newest, contiguous and in order.
	if len(targets) == 0 || targets[len(targets)-1] != fmt.Sprintf("tool_%03d", n-1) {
		t.Fatalf("kept %q", targets)
	}
	first := 0
	fmt.Sscanf(targets[0], "tool_%d", &first)
	for i, tg := range targets {
		if tg != fmt.Sprintf("tool_%03d", first+i) {
			t.Fatalf("kept lines not contiguous at %d: %q", i, targets)
		}
	}
	if first == 0 {
		t.Errorf("nothing was rotated away: %d lines kept of %d", len(targets), n)
	}

	// A restart appends to the live file and keeps rotating.
	before, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	l = openLog(t, cfg, Options{})
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "again", Decision: DecisionAllow})
	closeLog(t, l)
	after, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := os.ReadFile(cfg.Path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after, before) && !bytes.Equal(rotated, before) {
		t.Errorf("restart lost the live file's lines")
	}
	if lines := readLines(t, cfg.Path); len(lines) == 0 || lines[len(lines)-1]["target"] != "again" {
		t.Errorf("after the restart the live file ends with %v, want the entry recorded after it", lines)
	}
}

func TestSingleFileTruncates(t *testing.T) {
	cfg := config.Audit{Path: filepath.Join(t.TempDir(), "a.log"), MaxBytes: 1024, MaxFiles: 1, Arguments: "none"}
	l := openLog(t, cfg, Options{})
	for i := range 40 {
		l.Record(Entry{Agent: "a", Method: "tools/call", Target: fmt.Sprintf("t%02d", i), Decision: DecisionAllow})
	}
	closeLog(t, l)
	names, _ := filepath.Glob(cfg.Path + "*")
	lines := readLines(t, cfg.Path)
	if len(names) != 1 || len(lines) == 0 || lines[len(lines)-1]["target"] != "t39" {
		t.Errorf("files %q, last line %v", names, lines[len(lines)-1])
	}
}

// blockingSink blocks every WriteLine until released, like a stuck disk.
type blockingSink struct {
	release chan struct{}
	once    sync.Once
	entered chan struct{}
	mu      sync.Mutex
	lines   []string
	fail    error
}

func newBlockingSink() *blockingSink {
	return &blockingSink{release: make(chan struct{}), entered: make(chan struct{})}
}

func (s *blockingSink) WriteLine(b []byte) error {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.lines = append(s.lines, string(b))
	return nil
}
func (s *blockingSink) Flush() error { return nil }
func (s *blockingSink) Sync() error  { return nil }
func (s *blockingSink) Close() error { return nil }

func TestStuckDiskDropsAndCounts(t *testing.T) {
	logs := &testproc.Buffer{}
	reg := prometheus.NewRegistry()
	sink := newBlockingSink()
	l, err := newLog(sink, "digest", Options{Logger: zerolog.New(logs), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "0", Decision: DecisionAllow})
	<-sink.entered // the writer holds entry 0 and is stuck
	const extra = 500
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= QueueEntries+extra; i++ {
			l.Record(Entry{Agent: "a", Method: "tools/call", Target: fmt.Sprint(i), Decision: DecisionAllow, Arguments: json.RawMessage(`{"x":1}`)})
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Record blocked behind a stuck writer")
	}
	if got := l.Dropped(); got != extra {
		t.Errorf("dropped %d, want %d", got, extra)
	}
	if got := testutil.ToFloat64(l.droppedC); got != extra {
		t.Errorf("mcp_proxy_audit_dropped_total = %v, want %d", got, extra)
	}
	if n, err := testutil.GatherAndCount(reg, "mcp_proxy_audit_dropped_total"); n != 1 || err != nil {
		t.Errorf("registry has %d mcp_proxy_audit_dropped_total series (%v)", n, err)
	}
	warnings := strings.Count(logs.String(), "audit log entries dropped")
	if warnings != 1 || !strings.Contains(logs.String(), `"dropped":1,`) {
		t.Errorf("%d drop warnings, want exactly 1 within %s:\n%s", warnings, DropLogInterval, logs.String())
	}

	// Close waits at most its ctx while the disk is stuck.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := l.Close(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Close with a stuck disk = %v, want ErrClosed", err)
	}
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "late", Decision: DecisionAllow}) // ignored
	close(sink.release)
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.lines) != QueueEntries+1 {
		t.Fatalf("%d lines written, want %d", len(sink.lines), QueueEntries+1)
	}
	for i, line := range sink.lines {
		if !strings.Contains(line, fmt.Sprintf(`"target":"%d"`, i)) {
			t.Fatalf("line %d: %s", i, line)
		}
	}
}

func TestWriteErrorsAreCounted(t *testing.T) {
	logs := &testproc.Buffer{}
	sink := newBlockingSink()
	close(sink.release)
	sink.fail = errors.New("write /var/log/audit.log: no space left on device")
	l, err := newLog(sink, "digest", Options{Logger: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l.Record(Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow})
	}
	deadline := time.Now().Add(10 * time.Second)
	for (l.Dropped() < 3 || !strings.Contains(logs.String(), "no space")) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if l.Dropped() != 3 || !strings.Contains(logs.String(), "no space left on device") {
		t.Errorf("dropped %d; log:\n%s", l.Dropped(), logs.String())
	}
	sink.mu.Lock()
	sink.fail = nil
	sink.mu.Unlock()
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "ok", Decision: DecisionAllow})
	closeLog(t, l)
	if len(sink.lines) != 1 {
		t.Errorf("%d lines after the disk recovered, want 1", len(sink.lines))
	}
}

func TestFileSinkReopensAfterFailure(t *testing.T) {
	dir := t.TempDir()
	s, err := openFileSink(filepath.Join(dir, "a.log"), 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteLine([]byte("one\n")); err != nil || s.Flush() != nil {
		t.Fatal(err)
	}
	_ = s.fail(errors.New("simulated")) // as after a failed write
	if err := s.WriteLine([]byte("lost\n")); err == nil {
		t.Fatal("wrote at once after a failure; want a wait of reopenInterval")
	}
	s.failedAt = time.Now().Add(-reopenInterval)
	if err := s.WriteLine([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.log")); string(data) != "one\ntwo\n" {
		t.Errorf("file %q", data)
	}
}

func TestNewFile(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "open.log")
	if err := os.WriteFile(existing, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, config.Audit{Path: existing, MaxBytes: 4096, MaxFiles: 2}, Options{})
	closeLog(t, l)
	st, _ := os.Stat(existing)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("existing file left %v, want 0600", st.Mode().Perm())
	}
	if _, err := New(config.Audit{Path: dir, MaxBytes: 4096, MaxFiles: 2}, Options{}); err == nil {
		t.Error("New on a directory succeeded")
	}
	if l, err := New(config.Audit{}, Options{}); l != nil || err != nil {
		t.Errorf("New without a path = %v, %v; want nil, nil", l, err)
	}
}

func TestNilLogIsFree(t *testing.T) {
	var l *Log
	e := Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow, Arguments: json.RawMessage(`{}`)}
	if n := testing.AllocsPerRun(100, func() { l.Record(e) }); n != 0 {
		t.Errorf("Record on a nil Log: %.0f allocations", n)
	}
	if err := l.Close(context.Background()); err != nil || l.Dropped() != 0 {
		t.Error("nil Log")
	}
}

func BenchmarkRecord(b *testing.B) {
	for _, mode := range []string{"digest", "full"} {
		b.Run(mode, func(b *testing.B) {
			cfg := auditConfig(b.TempDir(), mode)
			l, err := New(cfg, Options{})
			if err != nil {
				b.Fatal(err)
			}
			e := Entry{Agent: "assistant", Session: "3f2a", Method: "tools/call", Target: "github__create_issue", Server: "github",
				Decision: DecisionAllow, Outcome: "ok", Duration: time.Millisecond,
				Arguments: json.RawMessage(`{"title":"Bug in the parser","body":"Steps to reproduce: run it twice.","labels":["bug"]}`),
				RequestID: json.RawMessage(`42`)}
			b.ReportAllocs()
			for b.Loop() {
				l.Record(e)
			}
			b.StopTimer()
			_ = l.Close(context.Background())
			if l.Dropped() > 0 {
				b.Logf("%d of %d dropped (the writer could not keep up)", l.Dropped(), b.N)
			}
		})
	}
}

// countingSink keeps the lines and counts the writes (Flush calls).
type countingSink struct {
	mu      sync.Mutex
	lines   int
	flushes int
}

func (s *countingSink) WriteLine([]byte) error {
	s.mu.Lock()
	s.lines++
	s.mu.Unlock()
	return nil
}

func (s *countingSink) Flush() error {
	s.mu.Lock()
	s.flushes++
	s.mu.Unlock()
	return nil
}

func (s *countingSink) Sync() error  { return nil }
func (s *countingSink) Close() error { return nil }

// TestLoneEntryGathersFollowers: the writer, woken by an entry that came
// alone, waits (GatherDelay; here until the test says) before it writes,
// and the entries recorded meanwhile go out in the same write.
func TestLoneEntryGathersFollowers(t *testing.T) {
	sink := &countingSink{}
	paused, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	l, err := newLog(sink, "digest", Options{Logger: zerolog.Nop(), gather: func() {
		once.Do(func() {
			close(paused)
			<-release
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	l.Record(Entry{Method: "tools/call", Target: "fx__echo"})
	select {
	case <-paused:
	case <-time.After(10 * time.Second): // a liveness bound, not a timing
		close(release)
		t.Fatal("the writer wrote a lone entry without waiting for others")
	}
	for range 4 {
		l.Record(Entry{Method: "tools/call", Target: "fx__echo"})
	}
	close(release)
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.lines != 5 || sink.flushes != 1 {
		t.Errorf("%d lines in %d writes, want 5 lines in 1 write", sink.lines, sink.flushes)
	}
}

// TestGatherEndsEarly: the writer's wait for followers ends once
// GatherEntries are queued, and at Close, however long GatherDelay is.
func TestGatherEndsEarly(t *testing.T) {
	sink := &countingSink{}
	l, err := newLog(sink, "digest", Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	l.gatherDelay = time.Hour
	gathering := gatherStarts(l)
	l.Record(Entry{Method: "tools/call", Target: "fx__echo"}) // alone: the writer waits
	waitGathering(t, gathering)
	for range GatherEntries {
		l.Record(Entry{Method: "tools/call", Target: "fx__echo"})
	}
	want := GatherEntries + 1
	deadline := time.Now().Add(10 * time.Second)
	for {
		sink.mu.Lock()
		lines, flushes := sink.lines, sink.flushes
		sink.mu.Unlock()
		if lines == want {
			if flushes != 1 {
				t.Errorf("%d lines in %d writes, want 1 write", lines, flushes)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lines written with %d entries queued, want them all at once", lines, want)
		}
		time.Sleep(time.Millisecond)
	}
	l.Record(Entry{Method: "tools/call", Target: "fx__echo"}) // a lone entry: the writer waits an hour
	closed := make(chan error, 1)
	go func() { closed <- l.Close(context.Background()) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the writer's gather")
	}
	if sink.lines != want+1 {
		t.Errorf("%d lines after Close, want %d", sink.lines, want+1)
	}
}

// flushCounter counts the writes (Flush calls) of the sink it wraps.
type flushCounter struct {
	sink
	flushes atomic.Int64
}

func (c *flushCounter) Flush() error {
	c.flushes.Add(1)
	return c.sink.Flush()
}

// BenchmarkRecordPaced records one entry every 100 µs, about the rate of
// one client's calls through the proxy, to the file, and reports the
// writes (system calls) per entry: what the writer costs a steady trickle
// of calls beside the encoding.
func BenchmarkRecordPaced(b *testing.B) {
	cfg := auditConfig(b.TempDir(), "digest")
	fs, err := openFileSink(cfg.Path, cfg.MaxBytes, cfg.MaxFiles)
	if err != nil {
		b.Fatal(err)
	}
	counted := &flushCounter{sink: fs}
	l, err := newLog(counted, "digest", Options{})
	if err != nil {
		b.Fatal(err)
	}
	e := Entry{Agent: "assistant", Session: "3f2a", Method: "tools/call", Target: "fx__echo", Server: "fx",
		Decision: DecisionAllow, Outcome: "ok", Duration: time.Millisecond,
		Arguments: json.RawMessage(`{"text":"ping"}`), RequestID: json.RawMessage(`42`)}
	b.ReportAllocs()
	for b.Loop() {
		l.Record(e)
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	_ = l.Close(context.Background())
	b.ReportMetric(float64(counted.flushes.Load())/float64(b.N), "writes/op")
}

// Arguments whose strings hold bytes that are not UTF-8 are written with
// U+FFFD in their place (the scrubber every line passes makes them so), so
// the line stays JSON a strict reader takes, and the digest is still that
// of the arguments as sent.
func TestArgumentsNotUTF8(t *testing.T) {
	args := json.RawMessage("{\"p\": \"a\xff\xfeb\", \"q\": \"\xc3\"}")
	sum := sha256.Sum256([]byte("{\"p\":\"a\xff\xfeb\",\"q\":\"\xc3\"}"))
	cfg := auditConfig(t.TempDir(), "full")
	l := openLog(t, cfg, Options{})
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow, Arguments: args, RequestID: json.RawMessage("\"r\xff\"")})
	closeLog(t, l)
	data, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(data) {
		t.Fatalf("the line is not UTF-8: %q", data)
	}
	lines := readLines(t, cfg.Path)
	if len(lines) != 1 {
		t.Fatalf("%d lines", len(lines))
	}
	got := fmt.Sprint(lines[0]["arguments"])
	if want := fmt.Sprint(map[string]any{"p": "a\uFFFDb", "q": "\uFFFD"}); got != want {
		t.Errorf("arguments = %s, want %s", got, want)
	}
	if got, want := lines[0]["arguments_sha256"], hex.EncodeToString(sum[:]); got != want {
		t.Errorf("arguments_sha256 = %v, want %s (the bytes as sent)", got, want)
	}
	if got := lines[0]["request_id"]; got != "r\uFFFD" {
		t.Errorf("request_id = %q", got)
	}
}

// benchSecrets are a config's secrets: an agent token, an upstream
// header and two environment values.
var benchSecrets = []string{"mcpp_3kq9Zr7vLx2Nw8Tb5Yc1Hd6Fj0Gm4Ps", "Bearer ghp_configuredtoken0123456789",
	"s3cr3t-value", "postgres://app:pa55w0rd@db.internal:5432/app"}

// BenchmarkWrite is the writer's work for each line of a batch of 64
// calls' entries (digest mode, a static token, a trace id): encoded,
// scrubbed with benchSecrets and handed to the sink.
func BenchmarkWrite(b *testing.B) {
	l, err := newLog(&countingSink{}, config.AuditArgumentsDigest, Options{Secrets: benchSecrets})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close(context.Background()) })
	batch := benchBatch(64)
	b.ReportAllocs()
	for b.Loop() {
		l.write(batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/line")
}

// keepingSink keeps the lines written to it.
type keepingSink struct {
	countingSink
	kept []string
}

func (s *keepingSink) WriteLine(line []byte) error {
	s.kept = append(s.kept, string(line))
	return s.countingSink.WriteLine(line)
}

// benchBatch is n records of calls as BenchmarkWrite writes them.
func benchBatch(n int) []*record {
	batch := make([]*record, n)
	for i := range batch {
		r := &record{Entry: Entry{Time: time.Now(), Agent: "assistant", Session: "mcp-proxy-5f0c1d2e9a8b7c6d", Token: 1,
			Method: "tools/call", Target: "github__create_issue", Server: "github", Decision: DecisionAllow,
			Outcome: "ok", Duration: time.Duration(400+i) * time.Microsecond, RequestID: json.RawMessage(strconv.Itoa(i)),
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}, cost: entryCost}
		r.digest, _, r.hasDigest = digestOf(json.RawMessage(`{"title":"a bug","body":"it breaks"}`), false)
		batch[i] = r
	}
	return batch
}

// TestWriteBatchAllocations: writing a batch costs the same few
// allocations however many lines it has (the encoding and scrubbing
// buffers are reused), not some for each line. Its lines have no request
// id: the check of one takes a scanner from encoding/json's sync.Pool,
// which the race detector empties at random.
func TestWriteBatchAllocations(t *testing.T) {
	l, err := newLog(&countingSink{}, config.AuditArgumentsDigest, Options{Secrets: benchSecrets})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	for _, size := range []int{64, 2000} { // 2,000 lines: some 900 KB, a busy proxy's batch
		batch := benchBatch(size)
		for _, r := range batch {
			r.RequestID = nil
		}
		l.write(batch) // the buffers grow once
		if n := testing.AllocsPerRun(5, func() { l.write(batch) }); n > 2 {
			t.Errorf("a batch of %d lines: %.0f allocations, want at most 2", len(batch), n)
		}
	}
}

// TestWriteSkipsUnencodable: an entry that cannot be encoded (arguments
// that are not JSON, which Record never keeps) is counted as dropped and
// leaves the lines around it whole.
func TestWriteSkipsUnencodable(t *testing.T) {
	sink := &keepingSink{}
	l, err := newLog(sink, config.AuditArgumentsFull, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	batch := benchBatch(3)
	batch[1].args = []byte(`{"broken":`)
	want := make([]string, 0, 2)
	for _, r := range []*record{batch[0], batch[2]} {
		b, err := r.encode()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(b))
	}
	l.write(batch)
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Join(sink.kept, "") != strings.Join(want, "") {
		t.Errorf("lines written:\n%s\nwant:\n%s", strings.Join(sink.kept, ""), strings.Join(want, ""))
	}
	if l.Dropped() != 1 {
		t.Errorf("%d dropped, want 1", l.Dropped())
	}
}

// TestRecordKeepsShortIDInline: Record of a call without arguments makes
// one allocation, its record, which holds a short request id too; the
// id is a copy (the caller may reuse its bytes), and a long one is
// copied apart.
func TestRecordKeepsShortIDInline(t *testing.T) {
	sink := &keepingSink{}
	l, err := newLog(sink, config.AuditArgumentsDigest, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	short := []byte(`"req-0123456789"`)
	long := []byte(`"` + strings.Repeat("x", maxInlineID) + `"`)
	e := Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow, RequestID: short}
	if n := testing.AllocsPerRun(100, func() { l.Record(e) }); n != 1 {
		t.Errorf("Record with a short request id: %.0f allocations, want 1", n)
	}
	l.Record(e)
	copy(short, `"req-XXXXXXXXXX"`)
	e.RequestID = long
	l.Record(e)
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	kept := sink.kept[len(sink.kept)-2:]
	if !strings.Contains(kept[0], `"request_id":"req-0123456789"`) || !strings.Contains(kept[1], `"request_id":`+string(long)) {
		t.Errorf("request ids written:\n%s%s", kept[0], kept[1])
	}
}

// TestKeyAfterHTMLEscapeInArguments: with arguments: full, a secret key
// right after '&', '<' or '>' written as a JSON \u escape (as Go's
// encoding/json writes them: a form body "user=bob\u0026password=...")
// has its value redacted, as it is after the raw byte.
func TestKeyAfterHTMLEscapeInArguments(t *testing.T) {
	cfg := auditConfig(t.TempDir(), "full")
	l := openLog(t, cfg, Options{})
	l.Record(Entry{Agent: "a", Method: "tools/call", Target: "t", Decision: DecisionAllow, Arguments: json.RawMessage(
		`{"body":"user=bob\u0026password=hunter22x","q":"a=1\u0026access_token=tk-5566778899",` +
			`"xml":"\u003etoken=tk-1122334455\u003c","word":"\u0061token=kept"}`)})
	closeLog(t, l)
	data, _ := os.ReadFile(cfg.Path)
	for _, s := range []string{"hunter22x", "tk-5566778899", "tk-1122334455"} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("the file holds %q:\n%s", s, data)
		}
	}
	lines := readLines(t, cfg.Path)
	if len(lines) != 1 {
		t.Fatalf("%d lines:\n%s", len(lines), data)
	}
	got, _ := json.Marshal(lines[0]["arguments"])
	want := `{"body":"user=bob\u0026password=[REDACTED]","q":"a=1\u0026access_token=[REDACTED]",` +
		`"word":"atoken=kept","xml":"\u003etoken=[REDACTED]\u003c"}`
	if string(got) != want {
		t.Errorf("arguments written:\n got %s\nwant %s", got, want)
	}
}

// TestGatherEndsPastThreshold: the writer's wait ends when concurrent
// Records take the queue past GatherEntries without any of them seeing it
// at exactly GatherEntries: one sends the 256th entry, another the 257th,
// and only then does either look at the queue's length.
func TestGatherEndsPastThreshold(t *testing.T) {
	sink := &countingSink{}
	l, err := newLog(sink, "digest", Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	l.gatherDelay = time.Hour
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	gathering := gatherStarts(l)
	l.Record(Entry{Method: "tools/call", Target: "fx__echo"}) // alone: the writer waits
	waitGathering(t, gathering)
	// GatherEntries Records that have sent their entry and not yet looked
	// at the queue's length.
	for range GatherEntries {
		l.queuedBytes.Add(entryCost)
		l.ch <- &record{Entry: Entry{Method: "tools/call", Target: "fx__echo", Time: time.Now()}, cost: entryCost}
	}
	l.Record(Entry{Method: "tools/call", Target: "fx__echo"}) // the 257th: it sees 257
	want := GatherEntries + 2
	deadline := time.Now().Add(10 * time.Second) // a liveness bound, not a timing
	for {
		sink.mu.Lock()
		lines := sink.lines
		sink.mu.Unlock()
		if lines == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lines written with %d entries queued, want them all: the writer still waits", lines, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// gatherStarts has l's writer report each wait for followers it begins (it
// took an entry and found the queue empty), then wait as it would. Call it
// before the first Record.
func gatherStarts(l *Log) <-chan struct{} {
	c := make(chan struct{}, 1)
	l.gather = func() {
		select {
		case c <- struct{}{}:
		default:
		}
		l.waitGathered()
	}
	return c
}

// waitGathering waits until the writer has begun to wait for followers: an
// entry recorded now joins its write. Polling the queue's length does not
// tell: the writer may have taken the lone entry and not yet looked whether
// others follow, and seeing one it writes at once.
func waitGathering(t *testing.T, gathering <-chan struct{}) {
	t.Helper()
	select {
	case <-gathering:
	case <-time.After(10 * time.Second): // a liveness bound, not a timing
		t.Fatal("the writer did not wait for followers of a lone entry")
	}
}

// TestRecordsReusedSafely: records go back to a pool once written; calls
// recording at once, faster than the writer, each get their own line with
// their own request id, none lost or mixed (under -race, a record read
// after the writer took it shows too).
func TestRecordsReusedSafely(t *testing.T) {
	sink := &keepingSink{}
	l, err := newLog(sink, "digest", Options{Logger: zerolog.Nop(), gather: func() {}})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf(`"w%d-%d"`, w, i)
				if i%2 == 1 {
					id = fmt.Sprintf(`"a-long-request-id-past-the-inline-bytes-w%d-%d"`, w, i)
				}
				l.Record(Entry{Method: "tools/call", Target: "fx__echo", RequestID: json.RawMessage(id),
					Arguments: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)})
			}
		})
	}
	wg.Wait()
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := l.Dropped(); d != 0 {
		t.Fatalf("%d entries dropped", d)
	}
	seen := map[string]bool{}
	for _, line := range sink.kept {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		id, _ := m["request_id"].(string)
		if seen[id] || id == "" {
			t.Errorf("request id %q written twice or empty: %s", id, line)
		}
		seen[id] = true
	}
	if len(seen) != workers*each {
		t.Errorf("%d distinct lines, want %d", len(seen), workers*each)
	}
}
