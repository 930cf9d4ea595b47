package rawjson

import (
	"encoding/json"
	"errors"
)

// Kind is what a JSON-RPC 2.0 message is.
type Kind int

// The kinds of JSON-RPC message.
const (
	// KindInvalid: not a JSON-RPC 2.0 message (Message.Invalid says why).
	KindInvalid Kind = iota
	// KindRequest has a method and an id.
	KindRequest
	// KindNotification has a method and no id.
	KindNotification
	// KindResponse has a result or an error, and an id.
	KindResponse
)

// Message is the envelope of one JSON-RPC 2.0 message: sub-slices of the
// bytes it was parsed from, which the caller must keep unchanged while it
// uses them. Nothing below the envelope is decoded.
type Message struct {
	Kind Kind
	// ID is the id's JSON text (a string or a number), nil when absent.
	// A "null" id is kept as the bytes `null`: JSON-RPC answers an invalid
	// request with it.
	ID json.RawMessage
	// Method is the decoded method name ("" for a response).
	Method string
	// Params, Result and Error are the members' values, nil when absent.
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
	// Invalid says why Kind is KindInvalid; the message may still carry an
	// ID worth echoing in the error response.
	Invalid string
	// HasID and HasMethod say whether the object names an "id" or a
	// "method" at all, whatever their values: an invalid message with a
	// method is an invalid request (with an id) or notification (without).
	HasID, HasMethod bool
}

// ErrDuplicateMember is returned for an object that names a member twice.
// JSON-RPC envelopes are read by more than one decoder along the way (this
// one, encoding/json, the upstream's own): each would pick a different copy,
// so such a message is refused instead of guessed at.
var ErrDuplicateMember = errors.New("rawjson: a member name appears twice")

// ParseMessage validates msg (one JSON object, whitespace around it
// allowed) in one pass and reads its JSON-RPC envelope. An error means msg
// is not JSON, not an object, or repeats a member name: the JSON-RPC parse
// error. A message that is JSON but not valid JSON-RPC 2.0 (no "jsonrpc":
// "2.0", an id that is not a string, number or null, a method that is not
// a string, both result and error) comes back with Kind KindInvalid and a
// reason, and its ID when it had a usable one.
//
// With ErrDuplicateMember the Message says what the envelope could still
// tell: Kind KindInvalid, HasID and HasMethod, and ID when the object names
// exactly one valid id; nothing else is read from it.
func ParseMessage(msg []byte) (Message, error) {
	var m Message
	var version, method json.RawMessage
	var members [8]Member // envelopes are small: no allocation for the list
	ms := members[:0]
	err := walk(msg, func(mem Member) bool {
		ms = append(ms, mem)
		v := msg[mem.ValueStart:mem.ValueEnd]
		switch mem.Key {
		case "jsonrpc":
			version = v
		case "id":
			m.ID = v
			m.HasID = true
		case "method":
			method = v
			m.HasMethod = true
		case "params":
			m.Params = v
		case "result":
			m.Result = v
		case "error":
			m.Error = v
		}
		return true
	})
	if err != nil {
		return Message{}, err
	}
	if repeats(ms) {
		return duplicateEnvelope(ms, m), ErrDuplicateMember
	}
	switch {
	case len(m.ID) > 0 && !validID(m.ID):
		m.ID = nil
		m.Invalid = "the id must be a string, a number or null"
	case string(version) != `"2.0"`:
		m.Invalid = `"jsonrpc" must be "2.0"`
	case method != nil:
		var err error
		if m.Method, err = Unquote(method); err != nil {
			m.Invalid = "the method must be a string"
			break
		}
		if m.Result != nil || m.Error != nil {
			m.Invalid = "a request cannot carry a result or an error"
			break
		}
		if m.Params != nil && m.Params[0] != '{' && m.Params[0] != '[' {
			m.Invalid = "params must be an object or an array"
			break
		}
		m.Kind = KindRequest
		if m.ID == nil {
			m.Kind = KindNotification
		}
	case m.Result != nil && m.Error != nil:
		m.Invalid = "a response cannot carry both a result and an error"
	case m.Result != nil || m.Error != nil:
		if m.ID == nil {
			m.Invalid = "a response needs an id"
			break
		}
		m.Kind = KindResponse
	default:
		m.Invalid = "neither a request nor a response"
	}
	return m, nil
}

// duplicateEnvelope is what ParseMessage returns of read, the envelope of
// an object whose members ms repeat a name: its ID only when the object
// names one, and a valid one.
func duplicateEnvelope(ms []Member, read Message) Message {
	m := Message{Invalid: "a member name appears twice", HasID: read.HasID, HasMethod: read.HasMethod}
	ids := 0
	for _, mem := range ms {
		if mem.Key == "id" {
			ids++
		}
	}
	if ids == 1 && validID(read.ID) {
		m.ID = read.ID
	}
	return m
}

// repeats reports whether two of ms have one name. Envelopes hold a few
// members: pairwise comparison needs no map.
func repeats(ms []Member) bool {
	if len(ms) > 32 {
		seen := make(map[string]bool, len(ms))
		for _, m := range ms {
			if seen[m.Key] {
				return true
			}
			seen[m.Key] = true
		}
		return false
	}
	for i := range ms {
		for j := i + 1; j < len(ms); j++ {
			if ms[i].Key == ms[j].Key {
				return true
			}
		}
	}
	return false
}

// Object checks that obj is one valid JSON object, whitespace around it
// allowed: all of it is validated, in one pass, allocating nothing for
// member names a JSON-RPC or MCP envelope uses.
func Object(obj []byte) error {
	return walk(obj, func(Member) bool { return true })
}

// Unique checks that obj is a JSON object naming no member twice at its top
// level. A value that is not an object passes (nothing to repeat).
func Unique(obj []byte) error {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil
	}
	// Messages and params have a few members: they are gathered on the
	// stack.
	var buf [uniqueStack]Member
	ms := buf[:0]
	if err := walk(obj, func(m Member) bool {
		ms = append(ms, m)
		return true
	}); err != nil {
		return err
	}
	if repeats(ms) {
		return ErrDuplicateMember
	}
	return nil
}

// uniqueStack is how many members Unique gathers without allocating.
const uniqueStack = 8

// validID reports whether id is a JSON-RPC id: a string, a number or null.
func validID(id []byte) bool {
	switch c := id[0]; {
	case c == '"', c == 'n':
		return true
	case c == '-' || c >= '0' && c <= '9':
		return true
	}
	return false
}

// IsNull reports whether v is the JSON literal null (or absent).
func IsNull(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

// IDKey is a JSON-RPC id as a map key that tells apart exactly the ids a
// peer tells apart: a string by its decoded value ("a" and "\u0061" are
// one id), a number by its spelling (integers beyond float64 precision
// stay apart, and 1 and 1.0 are two ids, as their bytes are echoed).
func IDKey(id json.RawMessage) string {
	if len(id) > 0 && id[0] == '"' {
		for _, c := range id[1 : len(id)-1] {
			if c == '\\' {
				var s string
				if json.Unmarshal(id, &s) == nil {
					return "s:" + s
				}
				break
			}
		}
		return "s:" + string(id[1:len(id)-1])
	}
	return "n:" + string(id)
}

// ResponseID returns the id of the JSON-RPC response that head begins, or
// nil. head may be cut anywhere (the first bytes of a message too large to
// read whole): only what it holds is read, and a value the cut could have
// shortened is not trusted. The id must be a string or a number and come
// with a top-level "result" or "error"; a "method" (a request or
// notification, whose id is not a response's) or a second "id" rules the
// message out.
func ResponseID(head []byte) json.RawMessage {
	i := SkipSpace(head, 0)
	if i >= len(head) || head[i] != '{' {
		return nil
	}
	i = SkipSpace(head, i+1)
	var id json.RawMessage
	response := false
	for {
		if i >= len(head) || head[i] != '"' {
			return nil
		}
		end, err := scanString(head, i)
		if err != nil {
			return nil
		}
		key, err := memberKey(head[i:end])
		if err != nil {
			return nil
		}
		i = SkipSpace(head, end)
		if i >= len(head) || head[i] != ':' {
			return nil
		}
		vs := SkipSpace(head, i+1)
		if key == "method" {
			return nil
		}
		if (key == "result" || key == "error") && id != nil {
			return id
		}
		ve, err := scanValue(head, vs, 1)
		if err != nil || ve >= len(head) {
			return nil // cut short, or nothing after it: it may go on past the head
		}
		switch key {
		case "id":
			v := head[vs:ve]
			if id != nil || v[0] == 'n' || !validID(v) {
				return nil
			}
			id = v
			if response {
				return id
			}
		case "result", "error":
			response = true
		}
		i = SkipSpace(head, ve)
		switch {
		case i < len(head) && head[i] == ',':
			i = SkipSpace(head, i+1)
		case i < len(head) && head[i] == '}' && response:
			return id
		default:
			return nil
		}
	}
}
