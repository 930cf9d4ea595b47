package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/randid"
	"github.com/mcp-proxy/mcp-proxy/upstream"
	"github.com/rs/zerolog"
)

// Logins of OAuth upstreams through the host (docs/security.md#oauth-upstreams): over stdio the
// proxy's one client is the person's own host, so when it supports
// URL-mode elicitation the proxy asks it to open the authorization page.
// Never over HTTP, where sessions belong to other people: the token is the
// proxy's identity at that server.

// loginWait bounds how long the proxy waits for the host's answer; the
// login itself goes on without it (the browser's callback completes it).
const loginWait = 10 * time.Minute

// logins holds the authorization URLs of servers waiting for a login, so
// that a host that connects after the login started is asked too.
type logins struct {
	gens     generations
	log      zerolog.Logger
	sessions *sessionTable

	mu      sync.Mutex
	pending map[string]string // server -> authorization URL
}

// AskToOpen asks the stdio client, when it supports URL-mode elicitation,
// to open the authorization page of server's login at url. It returns at
// once; a host that has not initialized yet is asked when it does (the
// question goes once it has sent notifications/initialized, session.ask).
// It is upstream.AuthOptions.OnAuthorizationURL, for stdio only.
func (lg *logins) AskToOpen(server, url string) {
	lg.mu.Lock()
	if lg.pending == nil {
		lg.pending = map[string]string{}
	}
	lg.pending[server] = url
	lg.mu.Unlock()
	lg.sessions.each(func(s *session) {
		if s.transport == transportStdio {
			lg.askToOpen(s, server, url)
		}
	})
}

// askPendingLogins asks a stdio client that just initialized (its
// capabilities are known now) to open the pages of the logins still
// waiting.
func (lg *logins) askPendingLogins(s *session) {
	if s.transport != transportStdio {
		return
	}
	lg.mu.Lock()
	pending := make(map[string]string, len(lg.pending))
	for server, url := range lg.pending {
		pending[server] = url
	}
	lg.mu.Unlock()
	g := lg.gens.gen()
	for server, url := range pending {
		if up := g.ups[server]; up != nil && up.Snapshot().State == upstream.StateNeedsAuth {
			lg.askToOpen(s, server, url)
		}
	}
}

// askToOpen sends one URL-mode elicitation/create to s, off the caller's
// path, when s's client supports it; the answer is only logged.
func (lg *logins) askToOpen(s *session, server, url string) {
	c := s.state.Client()
	if c == nil || !c.caps.elicitationURL || !s.agent.Granted(server) {
		return
	}
	params, _ := json.Marshal(map[string]string{
		"mode":          "url",
		"elicitationId": "mcp-proxy-login-" + randid.Hex(12),
		"url":           url,
		"message": fmt.Sprintf("The MCP server %q needs you to sign in before its tools can be used. "+
			"Open the page to authorize mcp-proxy; the server connects as soon as you have.", server),
	})
	go func() { // ends with the answer, the wait, or the session
		ctx, cancel := context.WithTimeout(context.Background(), loginWait)
		defer cancel()
		res, err := s.ask(ctx, nil, "elicitation/create", params)
		ev := lg.log.Info().Str("server", server)
		if err != nil {
			ev.Str("error", err.Error()).Msg("the host was not able to open the authorization page")
			return
		}
		action, _ := stringMember(res, "action")
		ev.Str("action", action).Msg("the host answered the request to open the authorization page")
	}()
}
