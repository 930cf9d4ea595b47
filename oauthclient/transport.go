package oauthclient

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// MaxTries bounds how many times one request is sent while its token is
// renewed or stepped up (docs/security.md#oauth-upstreams: at most 3 tries per call).
const MaxTries = 3

// Transport authorizes the requests of one server: an http.RoundTripper
// decorator around Base (which must not follow redirects itself; the
// http.Client above does, and each hop comes through here).
//
// A request to the server's own origin carries its access token (renewed
// ahead of expiry); a request to any other origin, a redirect included,
// carries no Authorization header at all, whatever the caller set. The
// answers it handles are described in the package doc. A RoundTrip that
// needs a login returns a *NeedsAuthError (wrapped by http.Client in a
// *url.Error) and calls OnNeedsAuth first.
type Transport struct {
	Base   http.RoundTripper
	Client *Client
	// OnNeedsAuth, if set, is called with the error whenever a request
	// finds that a login is needed. It runs on the request's goroutine and
	// must not block.
	OnNeedsAuth func(error)
	// Prompt shows the URL of a step-up login started by a 403
	// insufficient_scope; nil: no login is started and the request fails
	// with an error naming the command to run.
	Prompt Prompt
}

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.Client
	if originOf(req.URL) != c.origin {
		if req.Header.Get("Authorization") != "" {
			req = req.Clone(req.Context())
			req.Header.Del("Authorization")
		}
		return t.Base.RoundTrip(req)
	}
	ctx := req.Context()
	renewed := false
	for try := 1; ; try++ {
		tok, err := c.accessToken(ctx)
		if err != nil {
			return nil, t.fail(err)
		}
		out, err := t.send(req, tok, try)
		if err != nil {
			return nil, err
		}
		var ch Challenge
		switch out.StatusCode {
		case http.StatusUnauthorized:
			ch = ParseChallenge(out.Header.Values("WWW-Authenticate"))
			drain(out)
			if renewed {
				c.noteChallenge(ch)
				return nil, t.fail(c.forgetRefused(tok, ch))
			}
			if err := c.recover401(ctx, ch, tok); err != nil {
				return nil, t.fail(err)
			}
			renewed = true
		case http.StatusForbidden:
			ch = ParseChallenge(out.Header.Values("WWW-Authenticate"))
			if ch.Error != "insufficient_scope" {
				return out, nil
			}
			drain(out)
			if try >= MaxTries {
				return nil, fmt.Errorf("%w: the server still refused the request after %d tries", ErrInsufficientScope, MaxTries)
			}
			if err := c.stepUp(ctx, ch, t.Prompt); err != nil {
				return nil, err
			}
		default:
			return out, nil
		}
		if req.Body != nil && req.GetBody == nil {
			return nil, errors.New("the request cannot be re-sent with a new token (its body cannot be replayed)")
		}
	}
}

// send sends req (a copy) with tok, or without Authorization when tok is
// "". Tries after the first get a fresh body.
func (t *Transport) send(req *http.Request, tok string, try int) (*http.Response, error) {
	r := req.Clone(req.Context())
	if try > 1 && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	} else {
		r.Header.Del("Authorization")
	}
	return t.Base.RoundTrip(r)
}

func (t *Transport) fail(err error) error {
	if errors.Is(err, ErrNeedsAuth) && t.OnNeedsAuth != nil {
		t.OnNeedsAuth(err)
	}
	return err
}

// drain reads a little of a refused response's body so the connection can
// be reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
	resp.Body.Close()
}

// forgetRefused handles a token that the server refused right after it was
// renewed: the tokens are dropped (unless another process already replaced
// them) and a login is needed.
func (c *Client) forgetRefused(tok string, ch Challenge) error {
	if c.kind == KindClientCredentials {
		return fmt.Errorf("the server refused a fresh client_credentials token (HTTP 401)")
	}
	_ = c.updateEntry(func(e *Entry) *Entry {
		if e == nil || e.AccessToken != tok {
			return nil
		}
		return forget(e)
	})
	return c.needsAuth("the server refused a renewed token", ch)
}
