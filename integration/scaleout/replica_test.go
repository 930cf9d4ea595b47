package scaleout

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// replica is one mcp-proxy process with the fixture as its upstream "fx".
// The fixture appends every tools/call it receives to record, which is how
// the test learns which replica ran a call.
type replica struct {
	name   string // "a", "b"...
	proc   *proc
	addr   string // host:port of its MCP listener
	record string
}

// servingMessage is the proxy's log line that carries its URL.
const servingMessage = "serving MCP over Streamable HTTP; point your MCP client at this URL"

// startReplica runs a replica with the fixture as upstream "fx", and waits
// until its /readyz says the fixture is connected.
func startReplica(t *testing.T, proxyBin, fixtureBin, name string) *replica {
	t.Helper()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	return startProxy(t, proxyBin, name, dir, record, fmt.Sprintf(`log: {level: info, format: json}
servers:
  fx:
    command: %q
    args: ["-name", %q]
    env: {FIXTURE_RECORD: %q}
    required: true
`, fixtureBin, "replica-"+name, record))
}

// startProxy runs `mcp-proxy serve --listen 127.0.0.1:0` in dir with the
// config cfg, whose fixtures record their calls in record, and waits until
// its /readyz says it is ready.
func startProxy(t *testing.T, proxyBin, name, dir, record, cfg string) *replica {
	t.Helper()
	r := &replica{name: name, record: record}
	cfgPath := filepath.Join(dir, "mcp-proxy.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	onLine := func(line string) {
		var l struct {
			Message string `json:"message"`
			URL     string `json:"url"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == servingMessage && l.URL != "" {
			select {
			case urls <- l.URL:
			default:
			}
		}
	}
	cmd := exec.Command(proxyBin, "serve", "--config", cfgPath, "--listen", "127.0.0.1:0")
	cmd.Env = proxyEnv(dir)
	r.proc = startProc(t, "replica "+name, cmd, onLine)
	r.proc.cleanExit = true
	select {
	case u := <-urls:
		pu, err := url.Parse(u)
		if err != nil || pu.Path != "/mcp" {
			t.Fatalf("replica %s logged URL %q, want http://host:port/mcp", name, u)
		}
		r.addr = pu.Host
	case <-r.proc.done:
		t.Fatalf("replica %s exited before serving: %v\n%s", name, r.proc.err, tail(r.proc.stderr.String(), 4000))
	case <-time.After(startTimeout):
		t.Fatalf("replica %s logged no %q within %s", name, servingMessage, startTimeout)
	}
	waitReady(t, r)
	return r
}

// proxyEnv is the test's environment without the config search variable
// and with the XDG directories inside dir.
func proxyEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "MCP_PROXY_CONFIG" && name != "XDG_STATE_HOME" && name != "XDG_CONFIG_HOME" {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_STATE_HOME="+filepath.Join(dir, "state"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
}

// waitReady polls the replica's /readyz (on its MCP listener) until 200.
func waitReady(t *testing.T, r *replica) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(startTimeout)
	last := "no answer"
	for time.Now().Before(deadline) && !r.proc.exited() {
		res, err := hc.Get("http://" + r.addr + "/readyz")
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("replica %s not ready within %s (last: %s)\n%s", r.name, startTimeout, last, tail(r.proc.stderr.String(), 4000))
}

// fixtureCall is one call a replica's fixture received.
type fixtureCall struct {
	replica, tool, text string // text: the arguments' text, if any
}

// fixtureCalls reads the calls each replica's fixture received, in order.
func fixtureCalls(t *testing.T, replicas ...*replica) []fixtureCall {
	t.Helper()
	var out []fixtureCall
	for _, r := range replicas {
		f, err := os.Open(r.record)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var line struct {
				Tool      string `json:"tool"`
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("%s: %v", r.record, err)
			}
			out = append(out, fixtureCall{r.name, line.Tool, line.Arguments.Text})
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// recorded reads which replica ran each fx__echo call: text -> replica
// names, one entry per call the fixture received.
func recorded(t *testing.T, replicas ...*replica) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, c := range fixtureCalls(t, replicas...) {
		if c.tool == "echo" {
			out[c.text] = append(out[c.text], c.replica)
		}
	}
	return out
}
