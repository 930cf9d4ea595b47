// Command clienthost is the MCP host of the conformance suite's client
// scenarios (integration/conformance, TestConformanceClient): the runner
// starts a scenario server and runs `clienthost <url>`; clienthost writes a
// mcp-proxy config whose one upstream, "conf" (prefix ""), is that URL,
// starts the proxy ($MCP_PROXY_BIN) over stdio with go-sdk's client, waits
// until the scenario's tool is listed through the proxy and calls it.
// The auth scenarios' credentials come in $MCP_CONFORMANCE_CONTEXT.
//
// `clienthost open URL` is the proxy's auth.open in those runs: it follows
// the authorization redirect (the test authorization servers approve at
// once) to the proxy's loopback callback, in place of a browser.
//
// Exit status: 0 when the tool was called and answered, 1 otherwise.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds: the runner gives a client 60 s (the test passes --timeout); a
// host that finds nothing must exit well before.
const (
	toolWait     = 40 * time.Second
	pollInterval = 200 * time.Millisecond
	callTimeout  = 20 * time.Second
	openTimeout  = 20 * time.Second
)

// scenario is what the host does for one scenario: the tool to call and
// its arguments; expectFailure for the scenarios where the proxy must
// refuse to authorize (the host then exits once the proxy says so). act,
// when set, replaces the call: it runs once tool is listed (the 2026-07-28
// scenarios, as go-sdk's conformance everything-client drives them).
type scenario struct {
	tool          string
	args          map[string]any
	expectFailure bool
	act           func(ctx context.Context, session *mcp.ClientSession) error
}

func scenarioFor(name string) scenario {
	switch name {
	case "initialize":
		return scenario{}
	case "tools_call":
		return scenario{tool: "add_numbers", args: map[string]any{"a": 5, "b": 3}}
	case "elicitation-sep1034-client-defaults":
		return scenario{tool: "test_client_elicitation_defaults", args: map[string]any{}}
	case "sse-retry":
		return scenario{tool: "test_reconnection", args: map[string]any{}}
	case "request-metadata":
		return scenario{} // the proxy's own requests are judged: connect and list
	case "json-schema-ref-no-deref":
		return scenario{tool: "lookup_user", act: func(context.Context, *mcp.ClientSession) error { return nil }}
	case "json-schema-2020-12-preservation":
		return scenario{tool: "json_schema_echo", act: echoSchema}
	case "sep-2322-client-request-state":
		return scenario{tool: "test_mrtr_echo_state", act: callEach("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type")}
	case "http-standard-headers":
		return scenario{act: everyVerb}
	case "http-custom-headers":
		return scenario{tool: "test_custom_headers", act: contextCalls}
	case "http-invalid-tool-headers":
		return scenario{tool: "valid_tool", act: callAll(map[string]any{"region": "us-west1"})}
	case "auth/resource-mismatch", "auth/scope-retry-limit":
		return scenario{tool: "test-tool", args: map[string]any{}, expectFailure: true}
	default:
		return scenario{tool: "test-tool", args: map[string]any{}}
	}
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "open" {
		if err := follow(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "clienthost open:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: clienthost URL | clienthost open URL")
		os.Exit(2)
	}
	if err := run(os.Args[len(os.Args)-1]); err != nil {
		fmt.Fprintln(os.Stderr, "clienthost:", err)
		os.Exit(1)
	}
}

// follow GETs url and follows its redirects, as a browser would after the
// user approved: the last hop is the proxy's callback.
func follow(url string) error {
	hc := &http.Client{Timeout: openTimeout}
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	fmt.Fprintf(os.Stderr, "clienthost open: %s answered %d: %s\n", resp.Request.URL.Host, resp.StatusCode, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the redirect chain ended with HTTP %d", resp.StatusCode)
	}
	return nil
}

func run(url string) error {
	name := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	sc := scenarioFor(name)
	proxy := os.Getenv("MCP_PROXY_BIN")
	if proxy == "" {
		return errors.New("MCP_PROXY_BIN is not set")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "clienthost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgPath, err := writeConfig(dir, url, name, self)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), toolWait+callTimeout)
	defer cancel()
	cmd := exec.Command(proxy, "serve", "--config", cfgPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	watch := newLogWatch(os.Stderr)
	cmd.Stderr = watch
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-proxy-conformance-host", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: acceptDefaults,
	})
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("connect to mcp-proxy: %w", err)
	}
	defer func() {
		_ = session.Close() // closes the proxy's stdin: it shuts down
		_ = cmd.Wait()
	}()
	if sc.tool == "" && sc.act == nil {
		_, err := session.ListTools(ctx, nil)
		return err
	}
	if err := waitForTool(ctx, session, sc, watch); err != nil {
		return err
	}
	if sc.act != nil {
		return sc.act(ctx, session)
	}
	cctx, ccancel := context.WithTimeout(ctx, callTimeout)
	defer ccancel()
	res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: sc.tool, Arguments: sc.args})
	if err != nil {
		return fmt.Errorf("tools/call %s: %w", sc.tool, err)
	}
	out, _ := json.Marshal(res)
	fmt.Fprintf(os.Stderr, "clienthost: %s answered %s\n", sc.tool, out)
	if res.IsError {
		return fmt.Errorf("%s returned isError", sc.tool)
	}
	return nil
}

// waitForTool lists tools until sc.tool appears. It gives up when the
// proxy logs that the authorization failed (for every scenario), or, for
// the scenarios that expect a refusal, that the server is down or needs a
// login it cannot get.
func waitForTool(ctx context.Context, session *mcp.ClientSession, sc scenario, watch *logWatch) error {
	deadline := time.Now().Add(toolWait)
	for time.Now().Before(deadline) {
		if msg := watch.failure(sc.expectFailure); msg != "" {
			return fmt.Errorf("the proxy reports: %s", msg)
		}
		res, err := session.ListTools(ctx, nil)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range res.Tools {
			if t.Name == sc.tool || sc.tool == "" {
				return nil
			}
		}
		time.Sleep(pollInterval)
	}
	return fmt.Errorf("tool %s was not listed within %s", sc.tool, toolWait)
}

// echoSchema sends the inputSchema of json_schema_2020_12_tool, as listed
// through the proxy, to json_schema_echo.
func echoSchema(ctx context.Context, session *mcp.ClientSession) error {
	res, err := session.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	for _, t := range res.Tools {
		if t.Name == "json_schema_2020_12_tool" {
			_, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "json_schema_echo", Arguments: map[string]any{"schema": t.InputSchema}})
			return err
		}
	}
	return errors.New("json_schema_2020_12_tool is not listed")
}

// callEach calls the tools named, without arguments; a refusal is logged,
// not fatal (the scenario judges what reached its server).
func callEach(names ...string) func(context.Context, *mcp.ClientSession) error {
	return func(ctx context.Context, session *mcp.ClientSession) error {
		for _, n := range names {
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: n, Arguments: map[string]any{}})
			report(n, res, err)
		}
		return nil
	}
}

// callAll calls every tool listed through the proxy with args.
func callAll(args map[string]any) func(context.Context, *mcp.ClientSession) error {
	return func(ctx context.Context, session *mcp.ClientSession) error {
		res, err := session.ListTools(ctx, nil)
		if err != nil {
			return err
		}
		for _, t := range res.Tools {
			r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: args})
			report(t.Name, r, err)
		}
		return nil
	}
}

// everyVerb calls the first tool, reads the first resource and gets the
// first prompt listed through the proxy.
func everyVerb(ctx context.Context, session *mcp.ClientSession) error {
	if tools, err := session.ListTools(ctx, nil); err == nil && len(tools.Tools) > 0 {
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tools.Tools[0].Name, Arguments: map[string]any{}})
		report(tools.Tools[0].Name, r, err)
	}
	if res, err := session.ListResources(ctx, nil); err == nil && len(res.Resources) > 0 {
		_, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: res.Resources[0].URI})
		fmt.Fprintf(os.Stderr, "clienthost: resources/read %s: %v\n", res.Resources[0].URI, err)
	}
	if prompts, err := session.ListPrompts(ctx, nil); err == nil && len(prompts.Prompts) > 0 {
		_, err := session.GetPrompt(ctx, &mcp.GetPromptParams{Name: prompts.Prompts[0].Name, Arguments: map[string]string{}})
		fmt.Fprintf(os.Stderr, "clienthost: prompts/get %s: %v\n", prompts.Prompts[0].Name, err)
	}
	return nil
}

// contextCalls makes the tool calls $MCP_CONFORMANCE_CONTEXT lists
// ({"toolCalls":[{"name","arguments"}]}).
func contextCalls(ctx context.Context, session *mcp.ClientSession) error {
	var conf struct {
		ToolCalls []struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"toolCalls"`
	}
	if err := json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &conf); err != nil {
		return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
	}
	for _, c := range conf.ToolCalls {
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: c.Name, Arguments: c.Arguments})
		report(c.Name, r, err)
	}
	return nil
}

func report(tool string, res *mcp.CallToolResult, err error) {
	out, _ := json.Marshal(res)
	fmt.Fprintf(os.Stderr, "clienthost: %s answered %s (error %v)\n", tool, out, err)
}

// acceptDefaults accepts an elicitation with every property's default.
func acceptDefaults(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	content := map[string]any{}
	if s := req.Params.RequestedSchema; s != nil {
		raw, _ := json.Marshal(s)
		var schema struct {
			Properties map[string]struct {
				Default any `json:"default"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(raw, &schema)
		for k, p := range schema.Properties {
			if p.Default != nil {
				content[k] = p.Default
			}
		}
	}
	if len(content) == 0 && os.Getenv("MCP_CONFORMANCE_SCENARIO") == "sep-2322-client-request-state" {
		content["confirmed"] = true // as go-sdk's everything-client answers it
	}
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}

// writeConfig writes the proxy's config for the scenario and returns its
// path.
func writeConfig(dir, url, name, self string) (string, error) {
	var conf struct {
		ClientID         string `json:"client_id"`
		ClientSecret     string `json:"client_secret"`
		PrivateKeyPEM    string `json:"private_key_pem"`
		SigningAlgorithm string `json:"signing_algorithm"`
	}
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &conf); err != nil {
			return "", fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	open := strconv.Quote(self + " open")
	var auth string
	switch {
	case !strings.HasPrefix(name, "auth/"):
	case strings.HasPrefix(name, "auth/client-credentials-") && conf.PrivateKeyPEM != "":
		key := filepath.Join(dir, "client-key.pem")
		if err := os.WriteFile(key, []byte(conf.PrivateKeyPEM), 0o600); err != nil {
			return "", err
		}
		auth = fmt.Sprintf("{type: client_credentials, client_id: %q, private_key_file: %q, alg: %q}", conf.ClientID, key, conf.SigningAlgorithm)
	case strings.HasPrefix(name, "auth/client-credentials-"):
		auth = fmt.Sprintf("{type: client_credentials, client_id: %q, client_secret: %q}", conf.ClientID, conf.ClientSecret)
	case conf.ClientID != "":
		auth = fmt.Sprintf("{type: oauth, client_id: %q, client_secret: %q, open: %s}", conf.ClientID, conf.ClientSecret, open)
	case name == "auth/basic-cimd":
		auth = fmt.Sprintf("{type: oauth, client_metadata_url: %q, open: %s}", "https://conformance-test.local/client-metadata.json", open)
	default:
		auth = fmt.Sprintf("{type: oauth, open: %s}", open)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "log: {level: debug, format: json}\nblobs: {mode: passthrough}\nstate_dir: %q\nstartup_wait: 20s\n", filepath.Join(dir, "state"))
	fmt.Fprintf(&b, "servers:\n  conf:\n    url: %q\n    prefix: \"\"\n    connect_timeout: 20s\n", url)
	if auth != "" {
		fmt.Fprintf(&b, "    auth: %s\n", auth)
	}
	p := filepath.Join(dir, "mcp-proxy.yaml")
	return p, os.WriteFile(p, []byte(b.String()), 0o600)
}

// logWatch copies the proxy's stderr (JSON log lines) to out and notes
// what the host waits for.
type logWatch struct {
	out io.Writer
	pw  *io.PipeWriter

	mu                   sync.Mutex
	authFailed, downOnce string
}

func newLogWatch(out io.Writer) *logWatch {
	pr, pw := io.Pipe()
	w := &logWatch{out: out, pw: pw}
	go w.scan(pr)
	return w
}

func (w *logWatch) Write(p []byte) (int, error) { return w.pw.Write(p) }

func (w *logWatch) scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w.out, line)
		var ev struct {
			Message, Server, Error string
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Server != "conf" {
			continue
		}
		w.mu.Lock()
		switch ev.Message {
		case "authorization failed":
			w.authFailed = ev.Message + ": " + ev.Error
		case "upstream down":
			if w.downOnce == "" {
				w.downOnce = ev.Message + ": " + ev.Error
			}
		}
		w.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

// failure returns why to give up, "" to go on.
func (w *logWatch) failure(expectFailure bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.authFailed != "" {
		return w.authFailed
	}
	if expectFailure {
		return w.downOnce
	}
	return ""
}
