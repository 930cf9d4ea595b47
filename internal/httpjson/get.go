package httpjson

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Limits bound what Get reads of a response. A zero field reads nothing.
type Limits struct {
	// Body is the most bytes of a 200 response's body that Get accepts; a
	// longer body is an error of kind TooLarge.
	Body int64
	// Drain is the most bytes of another response's body that Get reads
	// and drops before closing it, so the connection can serve the next
	// request.
	Drain int64
}

// Kind says which step of a Get failed.
type Kind int

// The kinds of Error, in the order of the steps.
const (
	// Request: the request could not be made (a malformed URL).
	Request Kind = iota + 1
	// Send: no response came (unreachable host, TLS, timeout).
	Send
	// Status: the response's status is not 200 OK.
	Status
	// Read: the body broke off.
	Read
	// TooLarge: the body is longer than Limits.Body.
	TooLarge
	// Decode: the body is not a JSON object of dst's shape.
	Decode
)

// Error is a failed Get. Its text names neither the URL nor anything of the
// body: the caller adds the URL in the form it may show.
type Error struct {
	Kind Kind
	// Status is the HTTP status; 0 when no response came.
	Status int
	// Limit is Limits.Body, for TooLarge.
	Limit int64
	// Err is the cause, for Request, Send and Read; nil otherwise. For Send
	// it is the *url.Error of the http.Client, whose text repeats the URL.
	Err error
}

func (e *Error) Error() string {
	switch e.Kind {
	case Status:
		return fmt.Sprintf("status %d", e.Status)
	case TooLarge:
		return fmt.Sprintf("larger than %d bytes", e.Limit)
	case Decode:
		return "not a JSON document of the expected shape"
	}
	if e.Err == nil {
		return "failed"
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Get GETs rawURL with client and decodes its body into dst when the
// answer is 200 OK and the body is one JSON object of at most lim.Body
// bytes. status is the response's status, 0 when none came. Every error is
// an *Error. A response of another status has its body drained (at most
// lim.Drain bytes) and is an error of kind Status. The request ends with
// ctx.
func Get(ctx context.Context, client *http.Client, rawURL string, lim Limits, dst any) (status int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, &Error{Kind: Request, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, &Error{Kind: Send, Err: err}
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	if status != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, lim.Drain))
		return status, &Error{Kind: Status, Status: status}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, lim.Body+1))
	if err != nil {
		return status, &Error{Kind: Read, Status: status, Err: err}
	}
	if int64(len(body)) > lim.Body {
		return status, &Error{Kind: TooLarge, Status: status, Limit: lim.Body}
	}
	// Metadata (RFC 8414 §3.2, RFC 9728 §3.2) and key sets (RFC 7517 §5)
	// are JSON objects: a "null", which json.Unmarshal takes as nothing
	// to do, is no document either.
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) || json.Unmarshal(body, dst) != nil {
		return status, &Error{Kind: Decode, Status: status}
	}
	return status, nil
}
