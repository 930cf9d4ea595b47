package httpjson

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
)

type doc struct {
	Issuer string `json:"issuer"`
}

// TestGet: what each answer of the server gives the caller: the status,
// the decoded document, or an *Error of the right kind whose text names
// neither the URL nor the body.
func TestGet(t *testing.T) {
	const secretBody = "s3cret-body"
	tests := []struct {
		name     string
		status   int
		body     string
		wantKind Kind
		wantText string
		want     string
	}{
		{name: "object", status: 200, body: `{"issuer":"https://as.example.com"}`, want: "https://as.example.com"},
		{name: "object with blanks", status: 200, body: " \n\t{\"issuer\":\"x\"}\n", want: "x"},
		{name: "body at the limit", status: 200, body: `{"issuer":"` + strings.Repeat("a", 64-13) + `"}`, want: strings.Repeat("a", 64-13)},
		{name: "body over the limit", status: 200, body: `{"issuer":"` + strings.Repeat("a", 64-12) + `"}`, wantKind: TooLarge, wantText: "larger than 64 bytes"},
		{name: "not found", status: 404, body: secretBody, wantKind: Status, wantText: "status 404"},
		{name: "server error", status: 503, body: secretBody, wantKind: Status, wantText: "status 503"},
		{name: "html", status: 200, body: "<html>" + secretBody, wantKind: Decode, wantText: "not a JSON document of the expected shape"},
		{name: "null", status: 200, body: "null", wantKind: Decode, wantText: "not a JSON document of the expected shape"},
		{name: "array", status: 200, body: `[{"issuer":"x"}]`, wantKind: Decode, wantText: "not a JSON document of the expected shape"},
		{name: "wrong shape", status: 200, body: `{"issuer":7}`, wantKind: Decode, wantText: "not a JSON document of the expected shape"},
		{name: "truncated", status: 200, body: `{"issuer":"x"`, wantKind: Decode, wantText: "not a JSON document of the expected shape"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if got := r.Header.Get("Accept"); got != "application/json" || r.Method != http.MethodGet {
					t.Errorf("%s with Accept %q", r.Method, got)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			u := srv.URL + "/meta?tenant=secret"
			var d doc
			status, err := Get(context.Background(), srv.Client(), u, Limits{Body: 64, Drain: 4 << 10}, &d)
			if status != tc.status {
				t.Errorf("status %d, want %d", status, tc.status)
			}
			if tc.wantKind == 0 {
				if err != nil || d.Issuer != tc.want {
					t.Fatalf("Get = %+v, %v; want issuer %q", d, err, tc.want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Kind != tc.wantKind || e.Status != tc.status {
				t.Fatalf("Get error %#v, want kind %d, status %d", err, tc.wantKind, tc.status)
			}
			if err.Error() != tc.wantText {
				t.Errorf("error %q, want %q", err, tc.wantText)
			}
		})
	}
}

// TestGetNoResponse: a malformed URL and an unreachable host are errors of
// kinds Request and Send with status 0, carrying their cause.
func TestGetNoResponse(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close() // nothing listens there now
	tests := []struct {
		name string
		url  string
		kind Kind
	}{
		{"malformed", "http://[::1/x", Request},
		{"unreachable", addr + "/x", Send},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			status, err := Get(context.Background(), http.DefaultClient, tc.url, Limits{Body: 64}, &d)
			var e *Error
			if status != 0 || !errors.As(err, &e) || e.Kind != tc.kind || e.Err == nil || errors.Unwrap(err) != e.Err {
				t.Fatalf("Get = %d, %#v; want kind %d with a cause", status, err, tc.kind)
			}
			if err.Error() != e.Err.Error() {
				t.Errorf("error %q, want the cause's text %q", err, e.Err)
			}
		})
	}
}

// TestGetDrains: after a 404 with a body, the next request reuses the
// connection because Get read the body to its end.
func TestGetDrains(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2048")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
	}))
	defer srv.Close()
	client := srv.Client()
	var d doc
	if _, err := Get(context.Background(), client, srv.URL, Limits{Body: 64, Drain: 4 << 10}, &d); err == nil {
		t.Fatal("a 404 decoded")
	}
	reused := false
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	})
	_, _ = Get(ctx, client, srv.URL, Limits{Body: 64, Drain: 4 << 10}, &d)
	if !reused {
		t.Error("the second request opened a new connection: the 404's body was not drained")
	}
}
