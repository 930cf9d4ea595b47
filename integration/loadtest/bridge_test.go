package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeChild is the bridge's stdio upstream: it reads n request lines, then
// answers them in reverse order, with a notification and a request of its
// own and an answer to an unknown id in between, and ends its stdout.
func fakeChild(t *testing.T, in io.Reader, out io.WriteCloser, n int, forwarded chan<- string) {
	t.Helper()
	s := bufio.NewScanner(in)
	var ids []string
	for len(ids) < n && s.Scan() {
		line := s.Text()
		forwarded <- line
		if !strings.Contains(line, `"method":"tools/call"`) {
			continue
		}
		_, rest, _ := strings.Cut(line, `"id":`)
		id, _, _ := strings.Cut(rest, `,`)
		ids = append(ids, id)
	}
	fmt.Fprintln(out, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)
	fmt.Fprintln(out, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	fmt.Fprintln(out, `{"jsonrpc":"2.0","id":"nobody","result":{}}`)
	for i := len(ids) - 1; i >= 0; i-- {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"echo":%s}}`+"\n", ids[i], ids[i])
	}
	_ = out.Close()
}

// TestBridgeMatchesRepliesByID: concurrent POSTs each get the reply with
// their own id (numbers and strings), whatever the order of the child's
// lines; a notification is forwarded and gets 202; a body with raw newlines
// reaches the child as one line; once the child's stdout ends, a request
// gets 502.
func TestBridgeMatchesRepliesByID(t *testing.T) {
	childIn, toChild := io.Pipe()
	fromChild, childOut := io.Pipe()
	b := &bridgeServer{in: toChild, pending: map[string]chan []byte{}}
	srv := httptest.NewServer(b)
	defer srv.Close()
	ids := []string{`7`, `"a"`, `"b\n"`}
	forwarded := make(chan string, 10)
	childDone := make(chan struct{})
	go func() {
		defer close(childDone)
		fakeChild(t, childIn, childOut, len(ids), forwarded)
	}()
	readDone := make(chan error, 1)
	go func() { readDone <- b.readReplies(fromChild) }()

	post := func(body string) (int, string, string) {
		resp, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, "", ""
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(data)
	}
	if code, sid, _ := post("{\"jsonrpc\":\"2.0\",\n\"method\":\"notifications/initialized\"}"); code != http.StatusAccepted || sid != bridgeSessionID {
		t.Errorf("notification: HTTP %d, session %q; want 202 and %q", code, sid, bridgeSessionID)
	}
	if got := <-forwarded; got != `{"jsonrpc":"2.0", "method":"notifications/initialized"}` {
		t.Errorf("the child got %q", got)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			code, _, body := post(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{}}`)
			want := `{"jsonrpc":"2.0","id":` + id + `,"result":{"echo":` + id + `}}`
			if code != http.StatusOK || body != want {
				t.Errorf("id %s: HTTP %d %q, want 200 %q", id, code, body, want)
			}
		})
	}
	wg.Wait()
	<-childDone
	if err := <-readDone; err != nil {
		t.Errorf("readReplies: %v", err)
	}
	if code, _, _ := post(`{"jsonrpc":"2.0","id":9,"method":"tools/call"}`); code != http.StatusBadGateway {
		t.Errorf("after the child ended: HTTP %d, want 502", code)
	}
	for _, tc := range []struct {
		method, body string
		want         int
	}{
		{http.MethodPost, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, http.StatusBadRequest},
		{http.MethodPost, `{oops`, http.StatusBadRequest},
		{http.MethodGet, ``, http.StatusMethodNotAllowed},
		{http.MethodDelete, ``, http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+"/mcp", strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %q: HTTP %d, want %d", tc.method, tc.body, resp.StatusCode, tc.want)
		}
	}
}
