package config

import (
	"errors"

	"gopkg.in/yaml.v3"
)

// StringList is a list of strings that may also be written as one string
// (`groups: eng` is `groups: [eng]`), as claim values in agents.<a>.match.
type StringList []string

// UnmarshalYAML accepts a scalar or a sequence of scalars.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return errors.New("expected a string or a list of strings, got a list holding " + kindName(item))
			}
			out = append(out, item.Value)
		}
		*l = out
		return nil
	}
	return errors.New("expected a string or a list of strings, got " + kindName(n))
}
