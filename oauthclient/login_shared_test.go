package oauthclient

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// capture is a Prompt that hands the login's prompt to the test instead of
// a browser.
func capture() (Prompt, <-chan LoginPrompt) {
	ch := make(chan LoginPrompt, 4)
	return func(p LoginPrompt) { ch <- p }, ch
}

// loginAsync runs c.Login in a goroutine; its error arrives on the channel.
func loginAsync(ctx context.Context, c *Client, prompt Prompt) <-chan error {
	out := make(chan error, 1)
	go func() { out <- c.Login(ctx, Challenge{}, prompt) }()
	return out
}

// joined waits until n callers share the login under way.
func joined(t *testing.T, c *Client, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		got := 0
		if c.login != nil {
			got = c.login.waiters
		}
		c.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d callers never shared the login", n)
}

// TestLoginSharedCancel: two callers share one login; the first is
// cancelled (a step-up whose request was abandoned) and returns at once
// with its context's error, while the login goes on for the second, which
// gets the tokens when the browser comes back.
func TestLoginSharedCancel(t *testing.T) {
	f := newFakeAS(t)
	c, _ := newClient(t, f, config.ServerAuth{}, Options{})
	prompt, prompts := capture()

	ctx1, cancel1 := context.WithCancel(context.Background())
	first := loginAsync(ctx1, c, prompt)
	p := recv(t, prompts, 10*time.Second, "the login prompt")

	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	second := loginAsync(ctx2, c, prompt)
	joined(t, c, 2)

	cancel1()
	if err := recv(t, first, 5*time.Second, "the cancelled caller's return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v, want context.Canceled", err)
	}

	// The browser comes back now: the login of the remaining caller ends
	// well.
	resp, err := http.Get(p.URL)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("callback page: HTTP %d", resp.StatusCode)
	}
	if err := recv(t, second, 15*time.Second, "the waiting caller's return"); err != nil {
		t.Fatalf("the caller still waiting: %v, want the login's success", err)
	}
	if !c.HasToken() {
		t.Error("no token after the shared login")
	}
	if len(prompts) != 0 {
		t.Errorf("%d more prompts: the second caller started a login of its own", len(prompts))
	}
}

// TestLoginAbandoned: when every caller has gone, the login stops (its
// loopback listener closes), and the next Login starts a new one that
// works.
func TestLoginAbandoned(t *testing.T) {
	f := newFakeAS(t)
	c, _ := newClient(t, f, config.ServerAuth{}, Options{})
	prompt, prompts := capture()

	ctx, cancel := context.WithCancel(context.Background())
	done := loginAsync(ctx, c, prompt)
	p := recv(t, prompts, 10*time.Second, "the login prompt")
	cancel()
	if err := recv(t, done, 5*time.Second, "the abandoned caller's return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned login: %v", err)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := noFollow.Get(p.LocalURL)
		if err != nil {
			break // the listener is closed
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("the abandoned login still listens")
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := login(t, c, Challenge{}); err != nil {
		t.Fatalf("the next login: %v", err)
	}
	if !c.HasToken() {
		t.Error("no token after the next login")
	}
}

// recv receives from ch, failing the test if nothing comes within d.
func recv[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %s", what, d)
		var zero T
		return zero
	}
}
