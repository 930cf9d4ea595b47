package config

import (
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"120", 120 * time.Second, ""},
		{"0", 0, ""},
		{"120s", 120 * time.Second, ""},
		{"2m", 2 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"1.5s", 1500 * time.Millisecond, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"-5s", 0, `invalid duration "-5s": must not be negative`},
		{"-5", 0, `invalid duration "-5": must not be negative`},
		{"abc", 0, `invalid duration "abc": use whole seconds (120) or a Go duration (120s, 2m, 1h30m)`},
		{"", 0, `invalid duration "": use whole seconds (120) or a Go duration (120s, 2m, 1h30m)`},
		{"1.5", 0, `invalid duration "1.5": use whole seconds (120) or a Go duration (120s, 2m, 1h30m)`},
		{"10 s", 0, `invalid duration "10 s": use whole seconds (120) or a Go duration (120s, 2m, 1h30m)`},
		{"9223372037", 0, `invalid duration "9223372037": too large`},
		{"99999999999999999999", 0, `invalid duration "99999999999999999999": too large`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("ParseDuration(%q) error = %v, want %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || got.D() != tt.want || got.String() != tt.want.String() {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestDurationYAML(t *testing.T) {
	var v struct {
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("d: 90\n"), &v); err != nil || v.D.D() != 90*time.Second {
		t.Fatalf("unmarshal = %v, %v", v.D, err)
	}
	out, err := yaml.Marshal(v)
	if err != nil || string(out) != "d: 1m30s\n" {
		t.Fatalf("marshal = %q, %v", out, err)
	}
	if err := yaml.Unmarshal(out, &v); err != nil || v.D.D() != 90*time.Second {
		t.Fatalf("round trip = %v, %v", v.D, err)
	}
	err = yaml.Unmarshal([]byte("d: [1]\n"), &v)
	want := "expected a duration, got a list: use whole seconds (120) or a Go duration (120s, 2m, 1h30m)"
	if err == nil || err.Error() != want {
		t.Fatalf("list error = %v, want %q", err, want)
	}
}
