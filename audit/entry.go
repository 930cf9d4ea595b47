package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
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

// timeLayout is RFC 3339 in UTC with microseconds, fixed width so lines
// sort as text.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// encode writes r as one JSON line, newline included: the members in
// this order, the optional ones (marked so) left out when empty, strings
// escaped as encoding/json escapes them without HTML escaping, and raw
// values compacted (FuzzEncodeMatchesJSON holds it to encoding/json's
// output). Written by hand: encoding/json's reflection was about a fifth
// of what audit added to a call's CPU (docs/performance.md).
//
//	time, agent, session (optional), client, auth, token_position
//	(optional), method, target, server (optional), decision, rule,
//	approval, outcome, error (all four optional), duration_ms,
//	arguments_sha256, arguments, arguments_omitted, request_id, trace_id
//	(all five optional)
func (r *record) encode() ([]byte, error) {
	return r.appendLine(make([]byte, 0, 512+len(r.args)+len(r.Target)+len(r.Error))) // a call's line is 300-450 bytes
}

// appendLine appends encode's line to b. On error b is returned as it
// came.
func (r *record) appendLine(b []byte) ([]byte, error) {
	client, auth, tokenPos := r.Agent, AuthNone, 0
	switch {
	case r.Subject != "":
		client, auth = r.Subject, AuthOAuth
	case r.Token > 0:
		auth, tokenPos = AuthToken, r.Token
	}
	n := len(b)
	b = append(b, `{"time":"`...)
	b = r.Time.UTC().AppendFormat(b, timeLayout) // digits and -:.TZ+, nothing to escape
	b = append(b, '"')
	b = member(b, "agent", r.Agent)
	b = optional(b, "session", r.Session)
	b = member(b, "client", client)
	b = member(b, "auth", auth)
	if tokenPos != 0 {
		b = append(b, `,"token_position":`...)
		b = strconv.AppendInt(b, int64(tokenPos), 10)
	}
	b = member(b, "method", r.Method)
	b = member(b, "target", r.Target)
	b = optional(b, "server", r.Server)
	b = member(b, "decision", r.Decision)
	b = optional(b, "rule", r.Rule)
	b = optional(b, "approval", r.Approval)
	b = optional(b, "outcome", r.Outcome)
	b = optional(b, "error", r.Error)
	b = append(b, `,"duration_ms":`...)
	b = appendFloat(b, float64(r.Duration.Microseconds())/1000)
	if r.hasDigest {
		b = append(b, `,"arguments_sha256":"`...)
		b = hex.AppendEncode(b, r.digest[:])
		b = append(b, '"')
	}
	var err error
	if len(r.args) > 0 {
		if b, err = rawMember(b, "arguments", r.args); err != nil {
			return b[:n], err
		}
	}
	b = optional(b, "arguments_omitted", r.argsOmitted)
	if validID(r.RequestID) {
		if b, err = rawMember(b, "request_id", r.RequestID); err != nil {
			return b[:n], err
		}
	}
	b = optional(b, "trace_id", r.TraceID)
	return append(b, '}', '\n'), nil
}

// member appends ,"name":"value".
func member(b []byte, name, value string) []byte {
	b = append(append(append(b, ',', '"'), name...), '"', ':')
	return rawjson.AppendString(b, value)
}

// optional is member, or nothing for "".
func optional(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	return member(b, name, value)
}

// rawMember appends ,"name":raw with raw compacted, as encoding/json
// writes a json.RawMessage. On error what it returns is b's array with
// anything after len(b).
func rawMember(b []byte, name string, raw []byte) ([]byte, error) {
	b = append(append(append(b, ',', '"'), name...), '"', ':')
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, fmt.Errorf("audit: %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// appendFloat appends f as encoding/json writes a float64: the shortest
// decimal that reads back as f, in exponent form (e-7, not e-07) only
// below 1e-6 or from 1e21 on.
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	if abs == 0 || 1e-6 <= abs && abs < 1e21 {
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, 'e', -1, 64)
	if e := b[n:]; len(e) >= 4 && e[len(e)-4] == 'e' && e[len(e)-3] == '-' && e[len(e)-2] == '0' {
		e[len(e)-2] = e[len(e)-1]
		b = b[:len(b)-1]
	}
	return b
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
