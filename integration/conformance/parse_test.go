package conformance

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseExpectedFailures(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []expectedFailure
		wantErr string // substring; "" means no error
	}{
		{name: "empty file", in: "", want: nil},
		{name: "empty list", in: "server: []\n", want: nil},
		{name: "null list", in: "server:\n", want: nil},
		{
			name: "comment above and at the end of the line",
			in:   "server:\n  # first reason,\n  # second line\n  - a\n  - b # inline reason\n",
			want: []expectedFailure{{"a", "first reason, second line"}, {"b", "inline reason"}},
		},
		{
			name:    "entry without a comment",
			in:      "server:\n  # why a\n  - a\n  - b\n",
			wantErr: "line 4: b has no comment",
		},
		{
			name:    "comment on the key only",
			in:      "# about the list\nserver:\n  - a\n",
			wantErr: "a has no comment",
		},
		{name: "client key", in: "client:\n  - x # y\n", wantErr: `unknown key "client"`},
		{name: "not a list", in: "server: resources-read-text\n", wantErr: "must be a list"},
		{name: "not a mapping", in: "- a # b\n", wantErr: "want a mapping"},
		{name: "duplicate", in: "server:\n  - a # one\n  - a # two\n", wantErr: "a is listed twice"},
		{name: "number entry", in: "server:\n  - 12 # why\n", wantErr: "non-empty string"},
		{name: "nested list entry", in: "server:\n  - [a] # why\n", wantErr: "non-empty string"},
		{name: "broken yaml", in: "server: [a\n", wantErr: "invalid expected-failures file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseExpectedFailures([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errBadExpected) {
					t.Fatalf("err = %v, want errBadExpected containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestExpectedFailuresFileIsValid checks the committed file on its own, so
// that a bad edit is reported even where the runner is not installed.
func TestExpectedFailuresFileIsValid(t *testing.T) {
	list, err := loadExpectedFailures(expectedFailuresFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		t.Logf("expected failure %s: %s", e.scenario, e.reason)
	}
}
