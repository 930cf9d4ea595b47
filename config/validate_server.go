package config

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func (c *Config) validateServers(v *validator) {
	byPrefix := map[string]string{} // resource URI prefix -> first name
	checkNames(v, "servers", "server", sortedKeys(c.Servers), func(path, name string, unique bool) {
		if unique {
			prefix := ResourcePrefix(name)
			if first, dup := byPrefix[prefix]; dup {
				v.add(path, "resource URI prefix "+strconv.Quote(prefix)+" is also the prefix of server "+strconv.Quote(first)+
					` (prefixes are lowercased with "_" as "-")`)
			} else {
				byPrefix[prefix] = name
			}
		}
		if s := c.Servers[name]; s != nil {
			validateServer(v, path, s)
		}
	})
}

func validateServer(v *validator, path string, s *Server) {
	at := func(field string) string { return path + "." + field }
	hasCmd, hasURL := s.Command != "", s.URL != ""
	switch {
	case v.droppedUnder(path):
		// A key or value of this server was refused already: which of
		// command and url it has is not what its author wrote.
	case hasCmd && hasURL:
		v.add(path, "command and url are mutually exclusive: a server is a subprocess or a URL, not both")
	case !hasCmd && !hasURL:
		v.add(path, "needs command (a stdio server) or url (an http or sse server)")
	}
	stdio, remote := false, false
	partial := v.droppedUnder(path)
	switch s.Transport {
	case TransportStdio:
		stdio = true
		if hasURL && !hasCmd && !partial {
			v.add(at("transport"), "stdio needs command, not url")
		}
	case TransportHTTP, TransportSSE:
		remote = true
		if hasCmd && !hasURL && !partial {
			v.add(at("transport"), s.Transport+" needs url, not command")
		}
	case "":
		// Only when command and url are both set or both missing,
		// which is reported above.
	default:
		v.oneOf(at("transport"), s.Transport, serverTransports)
	}

	if hasURL {
		checkURL(v, at("url"), s.URL, s.TLSCACertPath != "" && remote)
	}
	if remote {
		stdioOnly := []struct {
			field string
			set   bool
		}{{"args", len(s.Args) > 0}, {"cwd", s.Cwd != ""}, {"env", len(s.Env) > 0}, {"inherit_env", s.InheritEnv}}
		for _, f := range stdioOnly {
			if f.set {
				v.add(at(f.field), "only for stdio servers")
			}
		}
	}
	if stdio {
		if len(s.Headers) > 0 {
			v.add(at("headers"), "only for http and sse servers")
		}
		if s.TLSCACertPath != "" {
			v.add(at("tls_ca_cert_path"), "only for http and sse servers")
		}
	}
	if s.TLSCACertPath != "" && !filepath.IsAbs(s.TLSCACertPath) {
		v.add(at("tls_ca_cert_path"), "must be an absolute path, got "+quoteValue(s.TLSCACertPath))
	}
	checkNoNUL(v, at("command"), s.Command)
	checkNoNUL(v, at("cwd"), s.Cwd)
	for i, a := range s.Args {
		checkNoNUL(v, indexPath(at("args"), i), a)
	}
	for _, k := range sortedKeys(s.Env) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			v.add(at("env"), "invalid variable name "+quoteValue(k))
			continue
		}
		if strings.Contains(s.Env[k], "\x00") {
			v.add(joinPath(at("env"), pathKey(k)), "value contains a NUL byte")
		}
	}
	checkHeaders(v, at("headers"), s.Headers)

	positive(v, at("timeout"), s.Timeout)
	if s.Timeout.D() > MaxTimeout {
		v.add(at("timeout"), "must be at most "+strconv.Itoa(int(MaxTimeout/time.Second))+"s")
	}
	positive(v, at("connect_timeout"), s.ConnectTimeout)
	if s.Keepalive < 0 {
		v.add(at("keepalive"), "must not be negative (0 turns pings off)")
	}
	if s.Prefix != nil && !validNameChars(*s.Prefix) {
		v.add(at("prefix"), `may only contain letters, digits, "_" and "-"`)
	}
	v.oneOf(at("protocol"), s.Protocol, protocols)
	if s.MaxResponseBytes < 0 {
		v.add(at("max_response_bytes"), "must not be negative (0 means the default, "+strconv.Itoa(DefaultMaxResponseBytes)+")")
	}
	if s.Required && !s.IsEnabled() {
		v.add(at("required"), "a disabled server can never be ready: drop required or enable the server")
	}
	if s.Sampling.MaxRPM <= 0 {
		v.add(at("sampling.max_rpm"), "must be greater than 0")
	}
	if s.Sampling.MaxTokensCap <= 0 {
		v.add(at("sampling.max_tokens_cap"), "must be greater than 0")
	}
	positive(v, at("sampling.timeout"), s.Sampling.Timeout)
}

func positive(v *validator, path string, d Duration) {
	if d <= 0 {
		v.add(path, "must be greater than 0")
	}
}

// checkURL checks an upstream URL. The URL itself is never quoted: it may
// carry credentials.
func checkURL(v *validator, path, raw string, needTLS bool) {
	u, err := url.Parse(raw)
	if err != nil {
		v.add(path, "not a valid URL")
		return
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		if needTLS {
			v.add(path, "must be https:// when tls_ca_cert_path is set")
		}
	case "https":
	default:
		v.add(path, "scheme must be http or https")
		return
	}
	if u.Host == "" || u.Hostname() == "" {
		v.add(path, "must include a host")
	}
}

func checkNoNUL(v *validator, path, s string) {
	if strings.Contains(s, "\x00") {
		v.add(path, "contains a NUL byte")
	}
}

// checkHeaders checks the headers at path (a server's, the registry's,
// tracing's): each name an HTTP token, each value free of control
// characters.
func checkHeaders(v *validator, path string, headers map[string]string) {
	for _, k := range sortedKeys(headers) {
		if !isHTTPToken(k) {
			v.add(path, "invalid header name "+quoteValue(k))
			continue
		}
		if !validHeaderValue(headers[k]) {
			v.add(joinPath(path, pathKey(k)), "invalid header value (it contains a control character)")
		}
	}
}

// isHTTPToken reports whether s is a valid HTTP header name (RFC 9110 token).
func isHTTPToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue refuses control characters other than tab, which would
// split or corrupt the request.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
