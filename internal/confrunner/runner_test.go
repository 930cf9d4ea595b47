package confrunner

import (
	"reflect"
	"testing"
)

func TestNodeMajor(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"v20.20.2", 20, true},
		{"v22.23.3", 22, true},
		{"v24.0.0-nightly", 24, true},
		{"20.1.0", 20, true},
		{"", 0, false},
		{"vX.1", 0, false},
		{"v0.12.0", 0, false},
	}
	for _, tt := range tests {
		got, err := nodeMajor(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("nodeMajor(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestWithNodeImport(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		path    string
		want    []string
		wantErr bool
	}{
		{
			name: "no NODE_OPTIONS",
			env:  []string{"A=1"},
			path: "/x/register.mjs",
			want: []string{"A=1", `NODE_OPTIONS=--import "/x/register.mjs"`},
		},
		{
			name: "existing NODE_OPTIONS kept first",
			env:  []string{"NODE_OPTIONS=--max-old-space-size=512", "B=2"},
			path: "/a b/register.mjs",
			want: []string{"B=2", `NODE_OPTIONS=--max-old-space-size=512 --import "/a b/register.mjs"`},
		},
		{name: "quote in path", env: nil, path: `/x"y/register.mjs`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withNodeImport(tt.env, tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResult(t *testing.T) {
	r := &Result{Checks: []Check{
		{ID: "a", Status: "SUCCESS"},
		{ID: "b", Status: "WARNING", ErrorMessage: "late", Details: []byte(`{"ms":791}`)},
		{ID: "c", Status: "INFO"},
	}}
	if r.Passed() || r.Count("SUCCESS") != 1 {
		t.Errorf("Passed %v, SUCCESS %d: a WARNING fails a scenario", r.Passed(), r.Count("SUCCESS"))
	}
	if p := r.Problems(); p != "    WARNING b: late\n      details: {\"ms\":791}\n" {
		t.Errorf("Problems = %q", p)
	}
	if ok := (&Result{Checks: []Check{{ID: "c", Status: "INFO"}}}); !ok.Passed() || ok.Problems() != "" {
		t.Error("INFO checks alone fail a scenario")
	}
}
