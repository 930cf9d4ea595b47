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
	// id holds a short RequestID's copy, in the record's own allocation:
	// a client's ids are numbers or short strings.
	id          [maxInlineID]byte
	digest      [sha256.Size]byte
	hasDigest   bool
	args        []byte // full mode only
	argsOmitted string // full mode: why the value is not written
	cost        int64  // bytes counted against QueueBytes
}

// maxInlineID is the longest request id a record keeps without an
// allocation of its own.
const maxInlineID = 24

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
	b, _, err := r.appendLine(make([]byte, 0, 512+len(r.args)+len(r.Target)+len(r.Error)), nil) // a call's line is 300-450 bytes
	return b, err
}

// appendLine appends encode's line to b. When vals is not nil, the start
// and end in b of each value the writer must scrub are appended to it,
// two ints a value: every value that came from a client, an upstream or
// the config. What the line holds besides them is JSON punctuation,
// lineFixed's texts (member names, and the values this package chooses:
// auth, a decision, arguments_omitted), the time, numbers, hex digests
// and trace ids. On error b and vals are returned as they came.
func (r *record) appendLine(b []byte, vals []int) ([]byte, []int, error) {
	client, auth, tokenPos := r.Agent, AuthNone, 0
	switch {
	case r.Subject != "":
		client, auth = r.Subject, AuthOAuth
	case r.Token > 0:
		auth, tokenPos = AuthToken, r.Token
	}
	n, nv := len(b), len(vals)
	b = append(b, `{"time":"`...)
	b = r.Time.UTC().AppendFormat(b, timeLayout) // digits and -:.TZ+, nothing to escape
	b = append(b, '"')
	b, vals = member(b, vals, "agent", r.Agent)
	b, vals = optional(b, vals, "session", r.Session)
	b, vals = member(b, vals, "client", client)
	b = fixed(b, "auth", auth)
	if tokenPos != 0 {
		b = append(b, `,"token_position":`...)
		b = strconv.AppendInt(b, int64(tokenPos), 10)
	}
	b, vals = member(b, vals, "method", r.Method)
	b, vals = member(b, vals, "target", r.Target)
	b, vals = optional(b, vals, "server", r.Server)
	if r.Decision == DecisionAllow || r.Decision == DecisionDeny {
		b = fixed(b, "decision", r.Decision)
	} else {
		b, vals = member(b, vals, "decision", r.Decision)
	}
	b, vals = optional(b, vals, "rule", r.Rule)
	b, vals = optional(b, vals, "approval", r.Approval)
	b, vals = optional(b, vals, "outcome", r.Outcome)
	b, vals = optional(b, vals, "error", r.Error)
	b = append(b, `,"duration_ms":`...)
	b = appendFloat(b, float64(r.Duration.Microseconds())/1000)
	if r.hasDigest {
		b = append(b, `,"arguments_sha256":"`...)
		b = hex.AppendEncode(b, r.digest[:])
		b = append(b, '"')
	}
	var err error
	if len(r.args) > 0 {
		if b, vals, err = rawMember(b, vals, "arguments", r.args); err != nil {
			return b[:n], vals[:nv], err
		}
	}
	if r.argsOmitted == omittedInvalid || r.argsOmitted == omittedTooLarge {
		b = fixed(b, "arguments_omitted", r.argsOmitted)
	} else {
		b, vals = optional(b, vals, "arguments_omitted", r.argsOmitted)
	}
	if validID(r.RequestID) {
		if b, vals, err = rawMember(b, vals, "request_id", r.RequestID); err != nil {
			return b[:n], vals[:nv], err
		}
	}
	if isTraceID(r.TraceID) {
		b = fixed(b, "trace_id", r.TraceID)
	} else {
		b, vals = optional(b, vals, "trace_id", r.TraceID)
	}
	return append(b, '}', '\n'), vals, nil
}

// Why arguments are left out of a line (arguments_omitted).
const (
	omittedInvalid  = "invalid_json"
	omittedTooLarge = "too_large"
)

// The parts of a line that appendLine does not mark as values to scrub:
// the member names and the values it chooses (lineFixed), the time
// (timeBytes), numbers as appendFloat and strconv write them
// (numberBytes), hex digests and trace ids (hexBytes), and the JSON
// around them. TestLineOwnParts holds the lines to it.
var lineFixed = []string{
	"time", "agent", "session", "client", "auth", "token_position", "method", "target", "server", "decision",
	"rule", "approval", "outcome", "error", "duration_ms", "arguments_sha256", "arguments", "arguments_omitted",
	"request_id", "trace_id",
	AuthOAuth, AuthToken, AuthNone, DecisionAllow, DecisionDeny, omittedInvalid, omittedTooLarge,
}

const (
	timeBytes   = "0123456789-:.TZ"
	numberBytes = "0123456789.eE+-"
	hexBytes    = "0123456789abcdef"
)

// member appends ,"name":"value", and the value's bounds to vals when vals
// is not nil.
func member(b []byte, vals []int, name, value string) ([]byte, []int) {
	b = append(append(append(b, ',', '"'), name...), '"', ':')
	start := len(b)
	b = rawjson.AppendString(b, value)
	if vals != nil {
		vals = append(vals, start, len(b))
	}
	return b, vals
}

// fixed appends ,"name":"value" for a value of the line's own (see
// lineFixed).
func fixed(b []byte, name, value string) []byte {
	b, _ = member(b, nil, name, value)
	return b
}

// optional is member, or nothing for "".
func optional(b []byte, vals []int, name, value string) ([]byte, []int) {
	if value == "" {
		return b, vals
	}
	return member(b, vals, name, value)
}

// isTraceID reports a trace id as the tracer writes it: 32 lower case hex
// digits.
func isTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// rawMember appends ,"name":raw with raw compacted, as encoding/json
// writes a json.RawMessage, and its bounds to vals as member does. On
// error what it returns is b's array with anything after len(b).
func rawMember(b []byte, vals []int, name string, raw []byte) ([]byte, []int, error) {
	b = append(append(append(b, ',', '"'), name...), '"', ':')
	start := len(b)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, vals, fmt.Errorf("audit: %s: %w", name, err)
	}
	b = buf.Bytes()
	if vals != nil {
		vals = append(vals, start, len(b))
	}
	return b, vals, nil
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
