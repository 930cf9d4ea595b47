package downstream

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/seal"
)

// Request states of multi-round-trip requests
// (docs/protocol.md#requests-from-servers). When a 2026-07-28 client's
// request needs the client's answers to input requests, the proxy's
// input_required result carries a request state that the client sends back
// with its answers. That state is sealed (internal/seal: authenticated
// encryption under the proxy's key, with an expiry): the client can neither
// read nor change it, and any process holding the key can take the retry.
// A new state is sealed for every round, so no two rounds share one.
//
// A state names whom and what it was issued for (agent, client, the tool or
// the method and target, the arguments' digest), the upstream server, the
// round, and either the upstream's own request state (the upstream speaks
// 2026-07-28 and the proxy passes its input requests through) or the id of
// a call parked in this process (the upstream speaks 2025-11-25 and waits
// for the answers on a call that goes on running, roundtrip.go).

// statePrefix marks the proxy's sealed request states.
const statePrefix = "px1."

// statePurpose is what the proxy's request states are sealed for: a token
// sealed for another purpose with the same key does not open as one.
const statePurpose = "mcp-proxy request state"

// roundState is what a sealed request state carries.
type roundState struct {
	Agent   string `json:"a"`
	Subject string `json:"s,omitempty"` // the client's principal
	Token   int    `json:"t,omitempty"`
	Key     string `json:"k"`           // what the client asked for: a tool's exposed name, or a method and its target
	Args    string `json:"d,omitempty"` // the digest of the arguments (argsDigest)
	Server  string `json:"v,omitempty"` // the upstream the request went to
	Round   int    `json:"r"`           // 1 for the first input_required
	// Up is the upstream's requestState, as it sent it (pass-through).
	Up json.RawMessage `json:"u,omitempty"`
	// Own are the proxy's own answers to input requests of the round that
	// the client was not asked (roots/list for a client without roots).
	Own json.RawMessage `json:"o,omitempty"`
	// Park is the id of the parked call the state belongs to (roundtrip.go).
	Park string `json:"p,omitempty"`
}

// isSealedState reports whether a requestState is one of the proxy's
// sealed states.
func isSealedState(s string) bool { return strings.HasPrefix(s, statePrefix) }

// newRoundState is a state for r's request of key, with r's agent and
// client.
func newRoundState(r *request, key string) roundState {
	return roundState{Agent: r.sess.agent.Name, Subject: r.sess.principal.subject, Token: r.sess.principal.token, Key: key}
}

// sealState seals st, valid for lifetime.
func (e *env) sealState(st roundState, lifetime time.Duration) string {
	b, _ := json.Marshal(st) // strings, ints and valid JSON: never fails
	return statePrefix + e.sealer.Seal(statePurpose, b, time.Now().Add(lifetime))
}

// openState opens a request state for r's request of key: it must be
// authentic, unexpired, and issued for the same agent, client and key.
func (e *env) openState(r *request, key, state string) (roundState, *wireError) {
	var st roundState
	msg, err := e.sealer.Open(statePurpose, strings.TrimPrefix(state, statePrefix), time.Now())
	switch {
	case errors.Is(err, seal.ErrExpired):
		return st, invalidState("it expired")
	case err != nil || json.Unmarshal(msg, &st) != nil:
		return st, invalidState("it was not issued by this proxy, or was changed")
	case st.Agent != r.sess.agent.Name || st.Subject != r.sess.principal.subject || st.Token != r.sess.principal.token:
		return st, invalidState("it was issued to another client")
	case st.Key != key:
		return st, invalidState("it belongs to another request")
	}
	return st, nil
}

// invalidState is the error of a retry whose request state is not good.
func invalidState(why string) *wireError {
	return errorf(codeInvalidParams, "invalid requestState: %s; send the request again without it", why)
}
