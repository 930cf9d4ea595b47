package config

import (
	"path/filepath"
)

// validateRegistry checks the registry key: an http or https URL (https
// when a CA is given), header names and values that can go on the wire,
// and an absolute CA path.
func (c *Config) validateRegistry(v *validator) {
	r := &c.Registry
	if r.URL != "" {
		checkURL(v, "registry.url", r.URL, r.TLSCACertPath != "")
	}
	checkHeaders(v, "registry.headers", r.Headers)
	if r.TLSCACertPath != "" && !filepath.IsAbs(r.TLSCACertPath) {
		v.add("registry.tls_ca_cert_path", "must be an absolute path, got "+quoteValue(r.TLSCACertPath))
	}
}
