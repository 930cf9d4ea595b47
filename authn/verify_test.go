package authn

import (
	"testing"

	"github.com/go-jose/go-jose/v4/jwt"
)

// TestAudienceMatches: an aud value names an accepted audience exactly or
// but for one trailing "/"; an empty value names nothing.
func TestAudienceMatches(t *testing.T) {
	const res = "https://proxy.example/mcp"
	tests := []struct {
		aud      jwt.Audience
		accepted []string
		want     bool
	}{
		{jwt.Audience{res}, []string{res}, true},
		{jwt.Audience{res + "/"}, []string{res}, true},
		{jwt.Audience{"https://proxy.example"}, []string{res, "https://proxy.example/"}, true},
		{jwt.Audience{"other", res}, []string{res}, true},
		{jwt.Audience{res + "//"}, []string{res}, false},
		{jwt.Audience{res + "/x"}, []string{res}, false},
		{jwt.Audience{"https://PROXY.example/mcp"}, []string{res}, false},
		{nil, []string{res}, false},
		{jwt.Audience{""}, []string{"/"}, false},
		{jwt.Audience{"/"}, []string{"/"}, true},
	}
	for _, tt := range tests {
		if got := audienceMatches(tt.aud, tt.accepted); got != tt.want {
			t.Errorf("audienceMatches(%q, %q) = %v, want %v", tt.aud, tt.accepted, got, tt.want)
		}
	}
}
