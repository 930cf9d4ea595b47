package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// durationHint is appended to every duration error so the fix is obvious.
const durationHint = "use whole seconds (120) or a Go duration (120s, 2m, 1h30m)"

// ParseDuration reads a config duration: a bare non-negative integer is a
// number of seconds ("120"), anything else is a Go duration ("120s", "2m",
// "1h30m"). Negative values and garbage are errors that quote the value.
func ParseDuration(s string) (Duration, error) {
	if isDigits(s) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > math.MaxInt64/int64(time.Second) {
			return 0, fmt.Errorf("invalid duration %s: too large", quoteValue(s))
		}
		return Duration(time.Duration(n) * time.Second), nil
	}
	if len(s) > 1 && s[0] == '-' && isDigits(s[1:]) {
		return 0, fmt.Errorf("invalid duration %s: must not be negative", quoteValue(s))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %s: %s", quoteValue(s), durationHint)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %s: must not be negative", quoteValue(s))
	}
	return Duration(d), nil
}

// UnmarshalYAML decodes a scalar with ParseDuration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("expected a duration, got " + kindName(n) + ": " + durationHint)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration in Go notation ("2m0s"), which
// ParseDuration reads back.
func (d Duration) MarshalYAML() (any, error) {
	return time.Duration(d).String(), nil
}

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String is the Go notation of the duration.
func (d Duration) String() string { return time.Duration(d).String() }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// kindName names a node's kind for messages ("a mapping", "a list", ...).
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		}
		return "a string"
	}
	return "an unknown node"
}
