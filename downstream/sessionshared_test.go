package downstream

import (
	"slices"
	"testing"

	"github.com/mcp-proxy/mcp-proxy/store"
)

// TestSharedStateFields: what a replica reads from a stored session's
// fields, and the capability letters, both ways.
func TestSharedStateFields(t *testing.T) {
	s := newSharedState("id", nil, testLogger())
	if s.Client() != nil || s.Level() != -1 || !s.NothingActivated() {
		t.Fatal("a new shared state is not empty")
	}
	s.load(store.Session{Fields: map[string]string{
		fieldAgent: "dev", fieldVersion: "2025-06-18", fieldCaps: "er", fieldLevel: "4", fieldInitialized: "1",
		prefixActivated + "fs__read_file": "1", prefixGroup + "2": "1", prefixGroup + "x": "1", prefixAlways + "fs__write_file": "1",
	}})
	c := s.Client()
	if c == nil || c.version != "2025-06-18" || c.caps != (clientCaps{elicitation: true, roots: true}) {
		t.Errorf("client = %+v", c)
	}
	if s.Level() != 4 || !s.wasInitialized() || !s.Activated("fs__read_file") || s.Activated("fs__write_file") ||
		!s.GroupActive(2) || s.GroupActive(0) || !s.ApprovedAlways("fs__write_file") || s.ApprovedAlways("fs__read_file") {
		t.Errorf("loaded state %+v", s)
	}
	s.load(store.Session{Fields: map[string]string{fieldAgent: "dev"}})
	if s.Client() != nil || s.Level() != -1 || !s.NothingActivated() || s.ApprovedAlways("fs__write_file") || s.wasInitialized() {
		t.Error("a second load kept what the store no longer has")
	}
	for _, caps := range []clientCaps{{}, {sampling: true}, {elicitation: true, elicitationURL: true}, {sampling: true, elicitation: true, elicitationURL: true, roots: true}} {
		if got := capsOfLetters(capsLetters(caps)); got != caps {
			t.Errorf("caps %+v came back as %+v", caps, got)
		}
	}
	if got := perCallOf(map[string]string{fieldPerCall: `["a","b"]`}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("perCallOf = %q", got)
	}
	if got := perCallOf(map[string]string{}); got != nil {
		t.Errorf("perCallOf without the field = %q, want nil", got)
	}
	if !servesClient(map[string]string{fieldAgent: "dev", fieldSubject: "alice", fieldToken: "2"}, client{agent: "dev", principal: principal{subject: "alice", token: 2}}) ||
		servesClient(map[string]string{fieldAgent: "dev", fieldSubject: "alice", fieldToken: "2"}, client{agent: "dev", principal: principal{subject: "bob", token: 2}}) {
		t.Error("servesClient does not tell clients apart")
	}
}
