package authn

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// matches reports whether an agent's match rules hold for claims: every
// claim named is present and holds one of the rule's values. No rules never
// match (such an agent is not reachable by access token).
func matches(rules map[string]config.StringList, claims map[string]json.RawMessage) bool {
	if len(rules) == 0 {
		return false
	}
	for name, want := range rules {
		raw, ok := claims[name]
		if !ok || !claimHolds(raw, want) {
			return false
		}
	}
	return true
}

// claimHolds reports whether a claim's value holds one of want. A string
// is compared as is; an array holds a value when one of its elements does;
// any other JSON value (number, boolean, null, object) and any non-string
// element is compared by its compact JSON text, so `42` matches "42" and
// `true` matches "true" but `4.2e1` does not match "42".
func claimHolds(raw json.RawMessage, want config.StringList) bool {
	for _, v := range claimValues(raw) {
		for _, w := range want {
			if v == w {
				return true
			}
		}
	}
	return false
}

// claimValues is the list of texts a claim holds (see claimHolds); nil for
// text that is not JSON.
func claimValues(raw json.RawMessage) []string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		out := make([]string, 0, len(items))
		for _, it := range items {
			if s, ok := jsonText(it); ok {
				out = append(out, s)
			}
		}
		return out
	}
	if s, ok := jsonText(raw); ok {
		return []string{s}
	}
	return nil
}

// jsonText is a JSON string's value, or another value's compact text.
func jsonText(raw json.RawMessage) (string, bool) {
	var s string
	if isJSONString(raw) {
		err := json.Unmarshal(raw, &s)
		return s, err == nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "", false
	}
	return b.String(), true
}

// tokenScopes reads the scopes of a token: the space-separated scope claim
// (RFC 8693 §4.2, RFC 9068) and the scp claim some servers use instead, as
// a string or an array of strings.
func tokenScopes(claims map[string]json.RawMessage) []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range []string{"scope", "scp"} {
		raw, ok := claims[name]
		if !ok {
			continue
		}
		var vals []string
		if s, ok := jsonText(raw); ok && isJSONString(raw) {
			vals = strings.Fields(s)
		} else if json.Unmarshal(raw, &vals) != nil {
			continue
		}
		for _, v := range vals {
			if v != "" && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	return out
}

// stringClaim returns a claim that is a JSON string, else "".
func stringClaim(claims map[string]json.RawMessage, name string) string {
	var s string
	if raw, ok := claims[name]; ok && isJSONString(raw) && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// isJSONString reports whether raw is a JSON string (not null, which
// decodes into a string without error).
func isJSONString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}
