package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"
)

// Decisions (Entry.Decision).
const (
	// DecisionAllow: policy let the request through (approval, if asked,
	// is in Entry.Approval).
	DecisionAllow = "allow"
	// DecisionDeny: a policy rule refused it (Entry.Rule names the rule).
	DecisionDeny = "deny"
)

// Client authentication kinds, the line's "auth" member.
const (
	AuthOAuth = "oauth" // an OAuth access token; client is its subject
	AuthToken = "token" // a static bearer token of the agent; token_position says which
	AuthNone  = "none"  // stdio, or an agent without tokens
)

// MaxFullArguments bounds the arguments written with arguments: full; a
// larger value is left out of the line (its digest stays), so one call
// cannot make a line of megabytes.
const MaxFullArguments = 64 << 10

// Entry is one decision. Record copies what it keeps: the caller may reuse
// the Entry and its byte slices once Record returns.
type Entry struct {
	// Time is when the request arrived; zero means when Record is called.
	Time time.Time
	// Agent is the agent the request was served as.
	Agent string
	// Session is the MCP session id; "" over stdio and for stateless
	// requests.
	Session string
	// Subject is the OAuth access token's subject (sub claim) when the HTTP
	// listener validated one; "" otherwise. It becomes the line's client.
	Subject string
	// Token is the 1-based position, in agents.<agent>.tokens, of the
	// static bearer token that authenticated the request; 0 for none.
	Token int
	// Method is tools/call, resources/read or prompts/get.
	Method string
	// Target is what the request names: the exposed tool or prompt name,
	// or the resource URI as the client sent it (its query is dropped when
	// written).
	Target string
	// Server is the upstream server the target belongs to; "" when unknown.
	Server string
	// Decision is DecisionAllow or DecisionDeny.
	Decision string
	// Rule is the policy rule of a denial (docs/agents.md#the-policy-rules: not_granted,
	// excluded_tools, read_only, ...); "" when allowed.
	Rule string
	// Approval is the answer to the approval question (approve, always,
	// deny, decline, cancel, timeout, unsupported, error); "" when no
	// question was asked.
	Approval string
	// Outcome is how the upstream call ended (ok, tool_error, error,
	// timeout, canceled); "" when nothing was sent upstream.
	Outcome string
	// Error is a short text of a failure, for the operator; it is
	// sanitized when written.
	Error string
	// Duration is from the request's arrival to its answer.
	Duration time.Duration
	// Arguments are the request's arguments (tools/call arguments,
	// prompts/get arguments) as received; nil when none. Read during
	// Record only.
	Arguments json.RawMessage
	// RequestID is the JSON-RPC id as received (a JSON string or number).
	RequestID json.RawMessage
	// TraceID is the hex trace id of the request's span, "" without
	// tracing: the way from a line to its trace.
	TraceID string
}

// record is what Record keeps of an Entry: the strings (immutable), the
// digest, and copies of the byte slices it writes.
type record struct {
	Entry
	digest      [sha256.Size]byte
	hasDigest   bool
	args        []byte // full mode only
	argsOmitted string // full mode: why the value is not written
	cost        int64  // bytes counted against QueueBytes
}

// line is the JSON layout of one audit line; members are written in this
// order and empty optional ones are left out.
type line struct {
	Time        string          `json:"time"`
	Agent       string          `json:"agent"`
	Session     string          `json:"session,omitempty"`
	Client      string          `json:"client"`
	Auth        string          `json:"auth"`
	TokenPos    int             `json:"token_position,omitempty"`
	Method      string          `json:"method"`
	Target      string          `json:"target"`
	Server      string          `json:"server,omitempty"`
	Decision    string          `json:"decision"`
	Rule        string          `json:"rule,omitempty"`
	Approval    string          `json:"approval,omitempty"`
	Outcome     string          `json:"outcome,omitempty"`
	Error       string          `json:"error,omitempty"`
	DurationMS  float64         `json:"duration_ms"`
	ArgsSHA256  string          `json:"arguments_sha256,omitempty"`
	Args        json.RawMessage `json:"arguments,omitempty"`
	ArgsOmitted string          `json:"arguments_omitted,omitempty"`
	RequestID   json.RawMessage `json:"request_id,omitempty"`
	TraceID     string          `json:"trace_id,omitempty"`
}

// timeLayout is RFC 3339 in UTC with microseconds, fixed width so lines
// sort as text.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// encode writes r as one JSON line, newline included.
func (r *record) encode() ([]byte, error) {
	l := line{
		Time:        r.Time.UTC().Format(timeLayout),
		Agent:       r.Agent,
		Session:     r.Session,
		Client:      r.Agent,
		Auth:        AuthNone,
		Method:      r.Method,
		Target:      r.Target,
		Server:      r.Server,
		Decision:    r.Decision,
		Rule:        r.Rule,
		Approval:    r.Approval,
		Outcome:     r.Outcome,
		Error:       r.Error,
		DurationMS:  float64(r.Duration.Microseconds()) / 1000,
		ArgsOmitted: r.argsOmitted,
		TraceID:     r.TraceID,
	}
	switch {
	case r.Subject != "":
		l.Client, l.Auth = r.Subject, AuthOAuth
	case r.Token > 0:
		l.Auth, l.TokenPos = AuthToken, r.Token
	}
	if r.hasDigest {
		l.ArgsSHA256 = hex.EncodeToString(r.digest[:])
	}
	if len(r.args) > 0 {
		l.Args = r.args
	}
	if validID(r.RequestID) {
		l.RequestID = r.RequestID
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&l); err != nil { // Encode ends the line with \n
		return nil, err
	}
	return buf.Bytes(), nil
}

// validID accepts a JSON-RPC id worth writing: a JSON string or number.
func validID(id json.RawMessage) bool {
	if len(id) == 0 || len(id) > 256 || !json.Valid(id) {
		return false
	}
	c := id[0]
	return c == '"' || c == '-' || c >= '0' && c <= '9'
}

// compactPool holds buffers for compacting arguments before the digest.
var compactPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// digestOf is the SHA-256 of args with insignificant white space removed;
// ok is false for absent or invalid JSON. With keep, compact is those
// compacted bytes (the line's arguments), so that they are compacted once.
func digestOf(args json.RawMessage, keep bool) (sum [sha256.Size]byte, compact []byte, ok bool) {
	if len(args) == 0 {
		return sum, nil, false
	}
	buf := compactPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= MaxFullArguments {
			buf.Reset()
			compactPool.Put(buf)
		}
	}()
	buf.Reset()
	if err := json.Compact(buf, args); err != nil {
		return sum, nil, false
	}
	if keep {
		compact = bytes.Clone(buf.Bytes())
	}
	return sha256.Sum256(buf.Bytes()), compact, true
}
