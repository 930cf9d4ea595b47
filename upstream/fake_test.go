package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The test binary doubles as the upstream MCP server of the stdio tests: with
// UPSTREAM_FAKE=1 in its environment it serves raw JSON-RPC on stdin/stdout
// (or, with UPSTREAM_FAKE=mcpgo, mcp-go's own stdio server, with
// UPSTREAM_FAKE=gosdk the official Go SDK's, loglevel_test.go) and exits.
func TestMain(m *testing.M) {
	switch os.Getenv("UPSTREAM_FAKE") {
	case "1":
		runFake(strings.Split(os.Getenv("UPSTREAM_FAKE_MODE"), ","))
		os.Exit(0)
	case "mcpgo":
		runMCPGoFake()
		os.Exit(0)
	case "gosdk":
		runGoSDKFake()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// exoticTool is sent byte for byte by the fake; odd spacing, key order,
// escapes and number forms would not survive a re-encoding.
const exoticTool = `{"name":"exotic", "description":"Exotic \u00e9 tool","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","oneOf":[{"required":["a"]},{"required":["b"]}],"properties":{"a":{"type":"integer","maximum":18446744073709551615},"b":{"type":"string","default":"x<y&z"}}},"annotations":{"readOnlyHint":true,"title":"Exotic"},"_meta":{"vendor.example/big":123456789012345678901234567890,"nested":{"k":[1,2.50,3e10]}},"x-future":{"z":1, "a":2}}`

// echoResult is the fake's tools/call result for "echo" (the arguments are
// spliced in where %s is).
const echoResult = `{"content":[{"type":"x-future","blob":"AAEC"}],"structuredContent":{"args":%s,"big":18446744073709551615},"_meta":{"k":1.0}}`

const fakeResource = `{"uri":"file:///notes.txt","name":"notes", "mimeType":"text/plain"}`

func runFake(mode []string) {
	has := func(f string) bool { return slices.Contains(mode, f) }
	if has("ignoreterm") {
		signal.Ignore(syscall.SIGTERM)
	}
	if msg := os.Getenv("UPSTREAM_FAKE_STDERR"); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	var mu sync.Mutex
	write := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = os.Stdout.WriteString(line + "\n")
	}
	reply := func(id json.RawMessage, result string) {
		write(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`)
	}
	replyErr := func(id json.RawMessage, code int, msg, data string) {
		e := fmt.Sprintf(`{"code":%d,"message":%q`, code, msg)
		if data != "" {
			e += `,"data":` + data
		}
		write(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":` + e + `}}`)
	}
	var extraMu sync.Mutex
	var extra []string
	// answers are the lines that answer the fake's own requests (tool ask).
	answers := make(chan string, 16)

	call := func(id json.RawMessage, params json.RawMessage) {
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		_ = json.Unmarshal(params, &p)
		switch p.Name {
		case "echo":
			args := p.Arguments
			if len(args) == 0 {
				args = json.RawMessage("null")
			}
			reply(id, fmt.Sprintf(echoResult, args))
		case "raw":
			// Answers with the result given, as its JSON text.
			var a struct{ Result string }
			_ = json.Unmarshal(p.Arguments, &a)
			reply(id, a.Result)
		case "fail":
			replyErr(id, -32042, "boom", `{"why":"because"}`)
		case "fail_big":
			replyErr(id, -32042, "boom", bigErrorData)
		case "meta":
			// The request's _meta as it arrived, and its id.
			var m struct {
				Meta json.RawMessage `json:"_meta"`
			}
			_ = json.Unmarshal(params, &m)
			if len(m.Meta) == 0 {
				m.Meta = json.RawMessage("null")
			}
			reply(id, `{"content":[],"structuredContent":{"meta":`+string(m.Meta)+`,"id":`+string(id)+`}}`)
		case "env":
			var a struct{ Names []string }
			_ = json.Unmarshal(p.Arguments, &a)
			out := map[string]*string{}
			for _, n := range a.Names {
				if v, ok := os.LookupEnv(n); ok {
					out[n] = &v
				} else {
					out[n] = nil
				}
			}
			b, _ := json.Marshal(out)
			reply(id, `{"content":[],"structuredContent":`+string(b)+`}`)
		case "cwd":
			wd, _ := os.Getwd()
			b, _ := json.Marshal(map[string]string{"cwd": wd})
			reply(id, `{"content":[],"structuredContent":`+string(b)+`}`)
		case "pid":
			reply(id, fmt.Sprintf(`{"content":[],"structuredContent":{"pid":%d}}`, os.Getpid()))
		case "exit":
			os.Exit(3)
		case "close_stdout":
			// Ends for the proxy without exiting: it keeps reading stdin.
			fmt.Fprintln(os.Stderr, "closing stdout")
			_ = os.Stdout.Close()
		case "close_stdout_exit":
			fmt.Fprintln(os.Stderr, "closing stdout")
			_ = os.Stdout.Close()
			time.Sleep(100 * time.Millisecond)
			os.Exit(5)
		case "slow":
			// never answers; says it has the call
			fmt.Fprintln(os.Stderr, "fake got slow")
		case "big":
			reply(id, `{"content":[{"type":"text","text":"`+strings.Repeat("x", 2<<20)+`"}]}`)
		case "add_tool":
			extraMu.Lock()
			extra = append(extra, `{"name":"added","description":"new"}`)
			extraMu.Unlock()
			write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			reply(id, `{"content":[]}`)
		case "notify":
			write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"n":1}}}`)
			reply(id, `{"content":[]}`)
		case "notify_big":
			write(`{"jsonrpc":"2.0","method":"notifications/progress","params":` + bigProgress + `}`)
			reply(id, `{"content":[]}`)
		case "ask":
			// Writes the line given, a request to the client, and answers
			// with the line that answered it (null after 10 s).
			var a struct{ Line string }
			_ = json.Unmarshal(p.Arguments, &a)
			write(a.Line)
			answer := "null"
			select {
			case answer = <-answers:
			case <-time.After(10 * time.Second):
			}
			reply(id, `{"content":[],"structuredContent":{"reply":`+answer+`}}`)
		case "burst":
			// Many list_changed notifications at once, the catalog unchanged.
			for range 100 {
				write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			}
			reply(id, `{"content":[]}`)
		default:
			replyErr(id, -32602, "unknown tool "+p.Name, "")
		}
	}

	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Method == "" && len(m.ID) > 0 { // an answer to the fake's request
			select {
			case answers <- sc.Text():
			default:
			}
			continue
		}
		var cursor struct {
			Cursor string `json:"cursor"`
		}
		_ = json.Unmarshal(m.Params, &cursor)
		switch m.Method {
		case "initialize":
			if has("silent") {
				continue
			}
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(m.Params, &p)
			reply(m.ID, `{"protocolVersion":"`+p.ProtocolVersion+`","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true},"prompts":{},"logging":{}},"serverInfo":{"name":"fake","version":"1.0"},"instructions":"Be nice."}`)
		case "ping":
			if !has("noping") {
				reply(m.ID, `{}`)
			}
			if has("logpings") {
				fmt.Fprintln(os.Stderr, "fake answered ping")
			}
		case "tools/list":
			if has("countlists") {
				fmt.Fprintln(os.Stderr, "fake served tools/list")
			}
			switch cursor.Cursor {
			case "":
				reply(m.ID, `{"tools":[`+exoticTool+`,{"name":"alpha","description":"first"}],"nextCursor":"c1"}`)
			case "c1":
				next := "c2"
				if has("loopcursor") {
					next = "c1"
				}
				reply(m.ID, `{"tools":[{"name":"beta","annotations":{"readOnlyHint":true}},{"description":"no name"},{"name":"alpha","description":"dup"}],"nextCursor":"`+next+`"}`)
			default:
				extraMu.Lock()
				items := append([]string{`{"name":"gamma","description":42}`}, extra...)
				extraMu.Unlock()
				reply(m.ID, `{"tools":[`+strings.Join(items, ",")+`]}`)
			}
		case "resources/list":
			reply(m.ID, `{"resources":[`+fakeResource+`]}`)
		case "prompts/list":
			if cursor.Cursor == "" {
				reply(m.ID, `{"prompts":[{"name":"p1"},{"name":"p2"}],"nextCursor":"next"}`)
			} else {
				reply(m.ID, `{"prompts":[{"name":"p3"}]}`)
			}
		case "tools/call":
			if strings.Contains(string(m.Params), `"pingflood"`) {
				// Answer, then flood pings and never read stdin again.
				reply(m.ID, `{"content":[]}`)
				for i := range 20000 {
					write(fmt.Sprintf(`{"jsonrpc":"2.0","id":"flood-%d","method":"ping"}`, i))
				}
				select {}
			}
			go call(m.ID, m.Params)
		case "notifications/cancelled":
			var p struct {
				RequestID string `json:"requestId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			fmt.Fprintln(os.Stderr, "fake got cancelled "+p.RequestID)
		default:
			if len(m.ID) > 0 {
				replyErr(m.ID, -32601, "Method not found", "")
			}
		}
	}
	if has("ignoreeof") {
		select {}
	}
}

// runMCPGoFake serves a small mcp-go server on stdio; with protocol auto the
// proxy negotiates the stateless 2026-07-28 core with it.
func runMCPGoFake() {
	s := server.NewMCPServer("mcpgo-fake", "1.0", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("hello", mcp.WithDescription("says hello")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("hello " + req.GetString("who", "nobody")), nil
		})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = server.NewStdioServer(s).Listen(ctx, os.Stdin, os.Stdout)
}
