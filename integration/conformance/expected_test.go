package conformance

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// expectedFailuresFile is the list of server scenarios expected to fail
// through the proxy, in the runner's --expected-failures format.
const expectedFailuresFile = "expected-failures.yml"

// expectedFailure is one entry of expected-failures.yml.
type expectedFailure struct {
	scenario string
	reason   string // the entry's own comment, without the '#'
}

// errBadExpected: expected-failures.yml breaks a rule of its format.
var errBadExpected = errors.New("invalid expected-failures file")

// parseExpectedFailures reads the runner's format, `server: [names]`, with
// one rule on top: every name carries its own comment (on the line above
// it or at the end of its line) saying why it is expected to fail. An empty
// file or an empty list means no expected failures. Only the `server` key
// is allowed: the tests run server scenarios only.
func parseExpectedFailures(data []byte) ([]expectedFailure, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadExpected, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: line %d: want a mapping with a `server` list", errBadExpected, top.Line)
	}
	var out []expectedFailure
	seen := make(map[string]bool)
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i], top.Content[i+1]
		if key.Value != "server" {
			return nil, fmt.Errorf("%w: line %d: unknown key %q (only `server` is allowed)", errBadExpected, key.Line, key.Value)
		}
		if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
			continue
		}
		if val.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("%w: line %d: `server` must be a list of scenario names", errBadExpected, val.Line)
		}
		for _, item := range val.Content {
			if item.Kind != yaml.ScalarNode || item.Tag != "!!str" || item.Value == "" {
				return nil, fmt.Errorf("%w: line %d: a scenario name must be a non-empty string", errBadExpected, item.Line)
			}
			if seen[item.Value] {
				return nil, fmt.Errorf("%w: line %d: %s is listed twice", errBadExpected, item.Line, item.Value)
			}
			seen[item.Value] = true
			reason := commentText(item.HeadComment + "\n" + item.LineComment)
			if reason == "" {
				return nil, fmt.Errorf("%w: line %d: %s has no comment saying why it is expected to fail", errBadExpected, item.Line, item.Value)
			}
			out = append(out, expectedFailure{scenario: item.Value, reason: reason})
		}
	}
	return out, nil
}

// commentText joins the text of YAML comment lines into one line.
func commentText(c string) string {
	var parts []string
	for line := range strings.SplitSeq(c, "\n") {
		if t := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#")); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

// loadExpectedFailures reads and checks the file at path.
func loadExpectedFailures(path string) ([]expectedFailure, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("expected failures: %w", err)
	}
	list, err := parseExpectedFailures(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return list, nil
}
