package config

import "strings"

// StatusPaths are the paths the status page serves on the metrics listener
// (package status, which checks that this list is its own): metrics.path
// must not take one of them.
var StatusPaths = []string{"/", "/login", "/logout", "/auth/login", "/auth/callback", "/tools/approve", "/tools/keep"}

// validateStatus keeps metrics.path off the status page's paths: neither
// one of them, nor a subtree ("/auth/") that holds one.
func (c *Config) validateStatus(v *validator) {
	p := c.Metrics.Path
	if !strings.HasPrefix(p, "/") {
		return // checkHTTPPath says so
	}
	for _, sp := range StatusPaths {
		if p == sp || strings.HasSuffix(p, "/") && strings.HasPrefix(sp, p) {
			v.add("metrics.path", "must not be "+quoteValue(p)+": the status page serves "+sp+" on the metrics listener")
			return
		}
	}
}
