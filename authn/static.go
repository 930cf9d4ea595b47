package authn

import (
	"crypto/subtle"
	"strings"
)

// maxTokenBytes bounds the bearer token the listener considers. Access
// tokens are a few KiB at most (a JWT with many groups); anything larger is
// refused before any parsing or comparing.
const maxTokenBytes = 16 << 10

// bearerToken extracts the token of an Authorization header of scheme
// Bearer (case-insensitive, RFC 6750 §2.1). ok is false when the header is
// absent, of another scheme, empty, or longer than maxTokenBytes.
func bearerToken(header string) (token string, ok bool) {
	scheme, given, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	given = strings.TrimSpace(given)
	if given == "" || len(given) > maxTokenBytes {
		return "", false
	}
	return given, true
}

// matchStatic returns the index of tok in tokens, or -1. Every token is
// compared in constant time, so the time taken says nothing about which
// one nearly matched.
func matchStatic(tok string, tokens []string) int {
	idx := -1
	for i, t := range tokens {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(t)) == 1 && idx < 0 {
			idx = i
		}
	}
	return idx
}

// StaticBearer reports whether header, the value of an Authorization
// header, is "Bearer <t>" with t one of tokens, checked as an agent's static
// tokens are (bounded length, every token compared in constant time). The
// metrics listener uses it for metrics.tokens.
func StaticBearer(header string, tokens []string) bool {
	tok, ok := bearerToken(header)
	return ok && matchStatic(tok, tokens) >= 0
}

// staticOwner finds the agent whose static tokens include tok: agent itself
// when it has tok, else the first other agent in config order, else "".
// Every token of every agent is compared, so a token is recognised as
// static (and never sent to an introspection endpoint) whatever endpoint
// it is presented at.
func (a *Authenticator) staticOwner(tok, agent string) (owner string, idx int) {
	idx = -1
	for _, name := range a.order {
		i := matchStatic(tok, a.cfg.Agents[name].Tokens)
		switch {
		case i < 0:
		case name == agent:
			owner, idx = name, i
		case owner == "":
			owner = name
		}
	}
	return owner, idx
}
