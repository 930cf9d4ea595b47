package config

import (
	"reflect"
	"testing"
)

// TestServersInOrder: config order is the order of the document, not of
// the names, and survives Redacted; a Config built in code falls back to
// name order.
func TestServersInOrder(t *testing.T) {
	doc := `servers:
  zeta: {command: z}
  alpha: {command: a}
  mid: {command: m}
`
	cfg, err := Parse([]byte(doc), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.ServersInOrder(), []string{"zeta", "alpha", "mid"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ServersInOrder = %v, want %v", got, want)
	}
	if got := cfg.Redacted().ServersInOrder(); !reflect.DeepEqual(got, []string{"zeta", "alpha", "mid"}) {
		t.Errorf("Redacted().ServersInOrder = %v", got)
	}
	built := &Config{Servers: map[string]*Server{"b": {}, "a": {}, "c": {}}}
	if got, want := built.ServersInOrder(), []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("built in code: ServersInOrder = %v, want %v", got, want)
	}
}
