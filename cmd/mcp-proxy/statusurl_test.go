package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/status"
)

// TestStatusURLCommand: `mcp-proxy status url` prints the status page's
// address with its token, which it makes in state_dir (0600) when there is
// none, for a browser on this host; `status token` prints the same token
// alone. Without metrics.listen, with port 0, or with a token file others
// may read, it says why, and never prints the token in an error.
func TestStatusURLCommand(t *testing.T) {
	state := t.TempDir()
	cfgFor := func(metrics string) string {
		return writeFile(t, "c.yaml", "blobs: {mode: passthrough}\nstate_dir: "+strconv.Quote(state)+"\n"+metrics)
	}
	out, _, err := runCLI(t, "status", "url", "--config", cfgFor("metrics: {listen: \"127.0.0.1:9464\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(status.TokenPath(state))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(data))
	if out != "http://127.0.0.1:9464/?token="+tok+"\n" || len(tok) != 43 {
		t.Errorf("status url printed %q; token file holds %q", out, tok)
	}
	if fi, _ := os.Stat(status.TokenPath(state)); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", fi.Mode())
	}
	if out, _, err := runCLI(t, "status", "token", "--config", cfgFor("")); err != nil || out != tok+"\n" {
		t.Errorf("status token: %q, %v", out, err)
	}
	for listen, want := range map[string]string{
		"0.0.0.0:9464":   "http://127.0.0.1:9464/?token=",
		"[::]:9000":      "http://127.0.0.1:9000/?token=",
		"localhost:9464": "http://localhost:9464/?token=",
		"[::1]:9464":     "http://[::1]:9464/?token=",
	} {
		out, _, err := runCLI(t, "status", "url", "--config", cfgFor("metrics: {listen: \""+listen+"\"}\n"))
		if err != nil || out != want+tok+"\n" {
			t.Errorf("metrics.listen %s: %q, %v", listen, out, err)
		}
	}

	refusals := []struct {
		name string
		args []string
		cfg  string
		code int
		want string
	}{
		{"no metrics listener", []string{"status", "url"}, "", exitUsage, "metrics.listen is not set: the proxy serves no status page"},
		{"port 0", []string{"status", "url"}, "metrics: {listen: \"127.0.0.1:0\"}\n", exitUsage, "takes its port at start"},
		{"no sub-verb", []string{"status"}, "", exitUsage, "usage: mcp-proxy status url | mcp-proxy status token"},
		{"unknown sub-verb", []string{"status", "show"}, "", exitUsage, "usage: mcp-proxy status url"},
	}
	for _, r := range refusals {
		_, _, err := runCLI(t, append(r.args, "--config", cfgFor(r.cfg))...)
		if code := exitCode(t, err); code != r.code || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: exit %d %v, want %d with %q", r.name, code, err, r.code, r.want)
		}
	}
	if err := os.Chmod(status.TokenPath(state), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "status", "token", "--config", cfgFor(""))
	if code := exitCode(t, err); code != exitRuntime || !strings.Contains(err.Error(), "accessible to other users") || strings.Contains(err.Error(), tok) {
		t.Errorf("token file 0644: exit %d %v", code, err)
	}
}

// TestServeSignInURL: without metrics.tokens the line "serving the status
// page" gives sign_in_url, the address with the token of state_dir (the
// one `status url` prints); a browser that opens it is signed in and may
// act. A wrong token is counted in mcp_proxy_status_sign_ins_total. With
// metrics.tokens the line has no sign_in_url and the log holds no token.
func TestServeSignInURL(t *testing.T) {
	_, metrics, log, state := startServeHTTPLog(t, "")
	line := logLine(t, log, "serving the status page")
	tok, err := status.LoadToken(state)
	if err != nil {
		t.Fatal(err)
	}
	page := strings.TrimSuffix(metrics, "/metrics")
	signIn, _ := line["sign_in_url"].(string)
	if signIn != page+"/?token="+tok || line["url"] != page+"/" {
		t.Fatalf("status page line %v; token %q", line, tok)
	}
	if n := strings.Count(log.String(), tok); n != 1 {
		t.Errorf("the token is in the log %d times, want once (the sign-in address)", n)
	}

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get(page + "/")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if code != http.StatusOK || csrf == nil || strings.Contains(body, ">Sign out<") {
		t.Fatalf("page before signing in: %d\n%s", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, page+"/login", strings.NewReader(url.Values{"csrf": {csrf[1]}, "token": {"not-it"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d", resp.StatusCode)
	}
	if _, m := get(metrics); !strings.Contains(m, `mcp_proxy_status_sign_ins_total{result="wrong_token"} 1`) {
		t.Errorf("metrics lack the wrong token:\n%s", grepLines(m, "mcp_proxy_status"))
	}
	if code, body := get(signIn); code != http.StatusOK || !strings.Contains(body, ">Sign out<") {
		t.Errorf("after opening sign_in_url: %d\n%s", code, body)
	}

	_, _, log2, state2 := startServeHTTPLog(t, ", tokens: [scrape-s3cret]")
	line = logLine(t, log2, "serving the status page")
	tok2, err := status.LoadToken(state2)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := line["sign_in_url"]; ok || strings.Contains(log2.String(), tok2) {
		t.Errorf("with metrics.tokens the log holds the status token: %v", line)
	}
}

// logLine is the fields of the first JSON log line with message msg.
func logLine(t *testing.T, log *syncBuffer, msg string) map[string]any {
	t.Helper()
	waitLogLine(t, log, msg)
	for _, l := range strings.Split(log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == msg {
			return m
		}
	}
	t.Fatalf("no line %q in the log:\n%s", msg, log.String())
	return nil
}
