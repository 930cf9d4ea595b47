package scaleout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// protocolVersion is the MCP version the raw client speaks.
const protocolVersion = "2025-11-25"

// maxBody bounds what the client reads of one response.
const maxBody = 1 << 20

// mcpClient is a raw Streamable HTTP client: one JSON-RPC message per POST,
// the session in the Mcp-Session-Id header, answers as JSON or SSE. It is
// safe for concurrent use.
type mcpClient struct {
	url    string
	hc     *http.Client
	nextID atomic.Int64
}

func newMCPClient(url string) *mcpClient {
	return &mcpClient{url: url, hc: &http.Client{Timeout: callTimeout}}
}

// rpcResponse is a JSON-RPC response.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// sseEvent is one data payload of an event stream and when it arrived.
type sseEvent struct {
	data json.RawMessage
	at   time.Time
}

// reply is what one POST got: the status, the session id header, the
// response (nil for 202 or an error status), the events before it, and the
// body of a non-2xx answer.
type reply struct {
	status    int
	sessionID string
	resp      *rpcResponse
	events    []sseEvent
	body      string
	respAt    time.Time
}

// post sends one message: a notification when method starts with
// "notifications/", else a request with a fresh id. An error means no HTTP
// answer, or an answer the client cannot read; any status is a reply.
func (c *mcpClient) post(ctx context.Context, sessionID, method string, params any) (*reply, error) {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	var id int64
	notification := strings.HasPrefix(method, "notifications/")
	if !notification {
		id = c.nextID.Add(1)
		msg["id"] = id
	}
	if params != nil {
		msg["params"] = params
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
		req.Header.Set("MCP-Protocol-Version", protocolVersion)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer res.Body.Close()
	r := &reply{status: res.StatusCode, sessionID: res.Header.Get("Mcp-Session-Id")}
	if res.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, maxBody))
		r.body = strings.TrimSpace(string(b))
		return r, nil
	}
	if notification || res.StatusCode == http.StatusAccepted {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxBody))
		return r, nil
	}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		err = readEvents(res.Body, id, r)
	} else {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(res.Body, maxBody))
		r.respAt = time.Now()
		if err == nil {
			r.resp = &rpcResponse{}
			err = json.Unmarshal(b, r.resp)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", method, err)
	}
	return r, nil
}

// readEvents reads an event stream until the response with id arrives,
// keeping every data payload before it with its arrival time.
func readEvents(body io.Reader, id int64, r *reply) error {
	sc := bufio.NewScanner(io.LimitReader(body, maxBody))
	sc.Buffer(make([]byte, 0, 64<<10), maxBody)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
			continue
		}
		if line != "" || len(data) == 0 {
			continue
		}
		payload := json.RawMessage(strings.Join(data, "\n"))
		data = nil
		now := time.Now()
		var resp rpcResponse
		if json.Unmarshal(payload, &resp) == nil && string(resp.ID) == fmt.Sprint(id) {
			r.resp, r.respAt = &resp, now
			return nil
		}
		r.events = append(r.events, sseEvent{data: payload, at: now})
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the event stream ended without the response")
}

// initialize opens a session: initialize, then notifications/initialized.
// It returns the session id the client got.
func (c *mcpClient) initialize(ctx context.Context) (string, error) {
	r, err := c.post(ctx, "", "initialize", map[string]any{
		"protocolVersion": protocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "scaleout-test", "version": "1.0.0"},
	})
	if err != nil {
		return "", err
	}
	if r.status != http.StatusOK || r.resp == nil || r.resp.Error != nil {
		return "", fmt.Errorf("initialize: status %d, body %q, response %+v", r.status, r.body, r.resp)
	}
	if r.sessionID == "" {
		return "", errors.New("initialize: the answer has no Mcp-Session-Id")
	}
	n, err := c.post(ctx, r.sessionID, "notifications/initialized", nil)
	if err != nil {
		return "", err
	}
	if n.status != http.StatusAccepted {
		return "", fmt.Errorf("notifications/initialized on session %s: status %d, body %q", r.sessionID, n.status, n.body)
	}
	return r.sessionID, nil
}

// callTool calls a tool on a session. The reply's status is for the caller
// to judge; a 200 whose response is not a successful tool result is an
// error.
func (c *mcpClient) callTool(ctx context.Context, sessionID, name string, args map[string]any, meta map[string]any) (*reply, error) {
	params := map[string]any{"name": name, "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	r, err := c.post(ctx, sessionID, "tools/call", params)
	if err != nil || r.status != http.StatusOK {
		return r, err
	}
	if r.resp == nil || r.resp.Error != nil {
		return r, fmt.Errorf("tools/call %s: JSON-RPC error %+v", name, r.resp)
	}
	return r, nil
}

// toolResult is the part of a tools/call result the test reads.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
}

// echo calls fx__echo and, when the answer is a 200, checks that the text
// comes back. Any other status is returned without an error: every caller
// judges r.status itself.
func (c *mcpClient) echo(ctx context.Context, sessionID, text string) (*reply, error) {
	r, err := c.callTool(ctx, sessionID, "fx__echo", map[string]any{"text": text}, nil)
	if err != nil || r.status != http.StatusOK {
		return r, err
	}
	var res toolResult
	if err := json.Unmarshal(r.resp.Result, &res); err != nil {
		return r, fmt.Errorf("fx__echo result: %w", err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].Text != text || res.StructuredContent["echo"] != text {
		return r, fmt.Errorf("fx__echo %q returned %s", text, r.resp.Result)
	}
	return r, nil
}

// deleteSession ends a session with DELETE and returns the status.
func (c *mcpClient) deleteSession(ctx context.Context, sessionID string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("MCP-Protocol-Version", protocolVersion)
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxBody))
	_ = res.Body.Close()
	return res.StatusCode, nil
}
