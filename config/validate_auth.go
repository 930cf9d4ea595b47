package config

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// Auth types of a server's auth key (docs/security.md#oauth-upstreams).
const (
	AuthBearer            = "bearer"
	AuthOAuth             = "oauth"
	AuthClientCredentials = "client_credentials"
)

var (
	authTypes = []string{AuthBearer, AuthOAuth, AuthClientCredentials}
	// tokenEndpointAuths are the methods an oauth client may be told to
	// use; client_credentials with a secret takes the two secret ones.
	tokenEndpointAuths = []string{"none", "client_secret_basic", "client_secret_post"}
	// jwtAlgs are the JWS algorithms of private_key_jwt assertions.
	jwtAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

// AuthDir is the folder of OAuth tokens and registrations under state_dir.
func (c *Config) AuthDir() string {
	if c.StateDir == "" {
		return ""
	}
	return filepath.Join(c.StateDir, "auth")
}

// validateAuth checks every server's auth key, and that OAuth servers
// have a state_dir.
func (c *Config) validateAuth(v *validator) {
	needsState := false
	for _, name := range sortedKeys(c.Servers) {
		s := c.Servers[name]
		if s == nil || s.Auth == nil {
			continue
		}
		validateServerAuth(v, joinPath("servers", pathKey(name)), s)
		if s.Auth.Type == AuthOAuth || s.Auth.Type == AuthClientCredentials {
			needsState = true
		}
	}
	// The form of state_dir is checked with the tool pins
	// (validate_integrity.go); here only that OAuth has one.
	if c.StateDir == "" && needsState {
		v.add("state_dir", "no default directory could be found for OAuth tokens: set state_dir, $XDG_STATE_HOME or $HOME")
	}
}

func validateServerAuth(v *validator, path string, s *Server) {
	a := s.Auth
	at := func(field string) string { return path + ".auth." + field }
	if s.Transport == TransportStdio {
		v.add(path+".auth", "only for http and sse servers (a stdio server gets its credentials through env)")
		return
	}
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			v.add(joinPath(path+".headers", pathKey(k)), "conflicts with auth, which sets the Authorization header: drop one")
		}
	}
	v.oneOf(at("type"), a.Type, authTypes)
	// Fields each type takes; any other non-empty field is an error.
	set := map[string]bool{
		"token": a.Token != "", "client_id": a.ClientID != "", "client_secret": a.ClientSecret != "",
		"token_endpoint_auth": a.TokenEndpointAuth != "", "scopes": len(a.Scopes) > 0,
		"client_metadata_url": a.ClientMetadataURL != "", "redirect_port": a.RedirectPort != 0,
		"open": a.Open != "", "private_key_file": a.PrivateKeyFile != "", "alg": a.Alg != "",
	}
	var allowed []string
	switch a.Type {
	case AuthBearer:
		allowed = []string{"token"}
		if a.Token == "" {
			v.add(at("token"), "required for type bearer")
		} else if !validHeaderValue(a.Token) {
			v.add(at("token"), "contains a control character")
		}
	case AuthOAuth:
		allowed = []string{"client_id", "client_secret", "token_endpoint_auth", "scopes", "client_metadata_url", "redirect_port", "open"}
		if a.ClientSecret != "" && a.ClientID == "" {
			v.add(at("client_secret"), "needs client_id")
		}
		if a.TokenEndpointAuth != "" {
			v.oneOf(at("token_endpoint_auth"), a.TokenEndpointAuth, tokenEndpointAuths)
			if a.TokenEndpointAuth != "none" && a.ClientSecret == "" {
				v.add(at("token_endpoint_auth"), a.TokenEndpointAuth+" needs client_secret")
			}
			if a.ClientID == "" {
				v.add(at("token_endpoint_auth"), "applies to a configured client_id only")
			}
		}
		if a.ClientMetadataURL != "" {
			u, err := url.Parse(a.ClientMetadataURL)
			if err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
				v.add(at("client_metadata_url"), "must be an https URL with a path (it is the client id)")
			}
		}
		if a.RedirectPort < 0 || a.RedirectPort > 65535 {
			v.add(at("redirect_port"), "must be a port from 0 (any free port) to 65535, got "+strconv.Itoa(a.RedirectPort))
		}
		if a.Open != "" && a.Open != "none" {
			if err := checkCommandLine(a.Open); err != "" {
				v.add(at("open"), err)
			}
		}
	case AuthClientCredentials:
		allowed = []string{"client_id", "client_secret", "token_endpoint_auth", "scopes", "private_key_file", "alg"}
		if a.ClientID == "" {
			v.add(at("client_id"), "required for type client_credentials")
		}
		switch {
		case a.ClientSecret == "" && a.PrivateKeyFile == "":
			v.add(path+".auth", "client_credentials needs client_secret or private_key_file")
		case a.ClientSecret != "" && a.PrivateKeyFile != "":
			v.add(path+".auth", "client_secret and private_key_file are mutually exclusive")
		}
		if a.PrivateKeyFile != "" && !filepath.IsAbs(a.PrivateKeyFile) {
			v.add(at("private_key_file"), "must be an absolute path, got "+quoteValue(a.PrivateKeyFile))
		}
		if a.Alg != "" {
			if a.PrivateKeyFile == "" {
				v.add(at("alg"), "applies to private_key_file only")
			} else {
				v.oneOf(at("alg"), a.Alg, jwtAlgs)
			}
		}
		if a.TokenEndpointAuth != "" {
			if a.PrivateKeyFile != "" {
				v.add(at("token_endpoint_auth"), "private_key_file always authenticates with private_key_jwt")
			} else {
				v.oneOf(at("token_endpoint_auth"), a.TokenEndpointAuth, tokenEndpointAuths[1:])
			}
		}
	default:
		return // the type was reported
	}
	for i, sc := range a.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
			v.add(indexPath(at("scopes"), i), "a scope is one non-empty word without quotes or backslashes")
		}
	}
	for _, f := range sortedKeys(set) {
		if set[f] && !contains(allowed, f) {
			v.add(at(f), "not used by type "+a.Type)
		}
	}
}

// checkCommandLine reports an unterminated quote in an auth.open command
// ("" when it splits).
func checkCommandLine(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case quote == '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				quote = 0
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			quote = c
		}
	}
	if quote != 0 {
		return "unterminated " + map[byte]string{'\'': "single", '"': "double"}[quote] + " quote"
	}
	if strings.TrimSpace(s) == "" {
		return "empty command"
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
