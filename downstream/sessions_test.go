package downstream

import (
	"context"
	"errors"
	"net/http/httptest"
	"regexp"
	"testing"
)

var sessionIDPattern = regexp.MustCompile(`^mcp-proxy-[0-9a-f]{32}$`)

func TestSessionRegistryLifecycle(t *testing.T) {
	s := newSessionRegistry()
	a, b := s.Generate(), s.Generate()
	if !sessionIDPattern.MatchString(a) || a == b {
		t.Fatalf("Generate = %q, %q", a, b)
	}
	if term, err := s.Validate(a); term || err != nil {
		t.Errorf("Validate(live) = %v, %v; want false, nil", term, err)
	}
	if _, err := s.Validate("mcp-proxy-ffffffffffffffffffffffffffffffff"); !errors.Is(err, errUnknownSession) {
		t.Errorf("Validate(never issued) error = %v, want %v", err, errUnknownSession)
	}
	if _, err := s.Validate(""); !errors.Is(err, errUnknownSession) {
		t.Errorf("Validate(\"\") error = %v", err)
	}
	if term, err := s.Terminate(a); term || err != nil {
		t.Errorf("Terminate(live) = %v, %v", term, err)
	}
	if term, err := s.Validate(a); !term || err != nil {
		t.Errorf("Validate(terminated) = %v, %v; want true, nil", term, err)
	}
	if term, err := s.Terminate(a); term || err != nil {
		t.Errorf("Terminate(terminated) = %v, %v", term, err)
	}
	if term, err := s.Terminate("unknown"); term || err != nil {
		t.Errorf("Terminate(unknown) = %v, %v", term, err)
	}
	if term, err := s.Validate(b); term || err != nil {
		t.Errorf("Validate(other live) = %v, %v", term, err)
	}
}

func TestSessionRegistryForgetsOldestTerminated(t *testing.T) {
	s := newSessionRegistry()
	ids := make([]string, maxTerminated+2)
	for i := range ids {
		ids[i] = s.Generate()
		if _, err := s.Terminate(ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids[:2] {
		if _, err := s.Validate(id); !errors.Is(err, errUnknownSession) {
			t.Errorf("terminated id %d beyond the bound: error %v, want unknown", i, err)
		}
	}
	for _, i := range []int{2, 3, len(ids) - 1} {
		if term, err := s.Validate(ids[i]); !term || err != nil {
			t.Errorf("terminated id %d within the bound: %v, %v; want terminated", i, term, err)
		}
	}
	if len(s.terminated) != maxTerminated || len(s.order) != maxTerminated {
		t.Errorf("remembered %d/%d ids, want %d", len(s.terminated), len(s.order), maxTerminated)
	}
}

// An id issued on one agent's endpoint is unknown on another's.
func TestSessionRegistryPerAgent(t *testing.T) {
	s := newSessionRegistry()
	forAgent := func(agent string) interface {
		Generate() string
		Validate(string) (bool, error)
		Terminate(string) (bool, error)
	} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r = r.WithContext(context.WithValue(r.Context(), agentKey{}, agent))
		return s.ResolveSessionIdManager(r)
	}
	alice, bob := forAgent("alice"), forAgent("bob")
	id := alice.Generate()
	if term, err := alice.Validate(id); term || err != nil {
		t.Errorf("own id: %v, %v", term, err)
	}
	if _, err := bob.Validate(id); err == nil {
		t.Error("another agent's id validated")
	}
	if _, err := bob.Terminate(id); err == nil {
		t.Error("another agent terminated the session")
	}
	if term, err := alice.Validate(id); term || err != nil {
		t.Errorf("after the other agent's attempts: %v, %v; want live", term, err)
	}
}
