package config

import (
	"encoding/base64"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// Store types (Store.Type, docs/shared-state.md).
const (
	StoreMemory = "memory"
	StoreRedis  = "redis"
)

const (
	// DefaultStoreType keeps everything in the process: nothing to install,
	// and the behaviour of a single proxy.
	DefaultStoreType = StoreMemory
	// DefaultStoreKeyPrefix marks the proxy's keys in a Redis other
	// programs may use too.
	DefaultStoreKeyPrefix = "mcp-proxy:"
	// StoreKeyBytes is the size of store.encryption_key once decoded: an
	// AES-256 key, and the input of every key derived from it.
	StoreKeyBytes = 32
)

var storeTypes = []string{StoreMemory, StoreRedis}

// storeDefaults fills the store keys the file left out.
func (c *Config) storeDefaults() {
	setString(&c.Store.Type, DefaultStoreType)
	if c.Store.KeyPrefix == "" && !c.isSet("store.key_prefix") {
		c.Store.KeyPrefix = DefaultStoreKeyPrefix
	}
}

// DecodeStoreKey decodes store.encryption_key: standard or URL-safe
// base64, padded or not, of exactly StoreKeyBytes bytes. Its errors never
// quote the key.
func DecodeStoreKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != StoreKeyBytes {
				return nil, &storeKeyError{"must be " + strconv.Itoa(StoreKeyBytes) + " bytes once decoded, got " + strconv.Itoa(len(b)) + " (make one with: openssl rand -base64 32)"}
			}
			return b, nil
		}
	}
	return nil, &storeKeyError{"not valid base64 (make one with: openssl rand -base64 32)"}
}

type storeKeyError struct{ msg string }

func (e *storeKeyError) Error() string { return e.msg }

func (c *Config) validateStore(v *validator) {
	s := &c.Store
	v.oneOf("store.type", s.Type, storeTypes)
	if strings.ContainsFunc(s.KeyPrefix, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		v.add("store.key_prefix", "must not contain spaces or control characters")
	}
	if s.Type != StoreRedis {
		if s.Type != StoreMemory {
			return
		}
		only := func(key string, set bool) {
			if set {
				v.add("store."+key, "only for type redis")
			}
		}
		only("url", s.URL != "")
		only("encryption_key", s.EncryptionKey != "")
		only("tls_ca_cert_path", s.TLSCACertPath != "")
		only("sentinel", s.Sentinel != nil)
		return
	}
	switch {
	case s.URL == "":
		v.add("store.url", "required with type redis (redis://host:6379 or rediss://host:6380)")
	default:
		checkStoreURL(v, s)
	}
	switch {
	case s.EncryptionKey == "":
		v.add("store.encryption_key", "required with type redis: 32 bytes, base64, from a secret (for example \"${MCP_PROXY_STORE_KEY}\"; make one with: openssl rand -base64 32)")
	default:
		if _, err := DecodeStoreKey(s.EncryptionKey); err != nil {
			v.add("store.encryption_key", err.Error())
		}
	}
	if p := s.TLSCACertPath; p != "" && !filepath.IsAbs(p) {
		v.add("store.tls_ca_cert_path", "must be an absolute path, got "+quoteValue(p))
	}
	if sn := s.Sentinel; sn != nil {
		if sn.Master == "" {
			v.add("store.sentinel.master", "required: the name the sentinels know the master by")
		}
		if len(sn.Addrs) == 0 {
			v.add("store.sentinel.addrs", "required: host:port of at least one sentinel")
		}
		for i, a := range sn.Addrs {
			if host, port, err := net.SplitHostPort(a); err != nil || host == "" || !validPort(port) {
				v.add(indexPath("store.sentinel.addrs", i), "must be host:port, got "+quoteValue(a))
			}
		}
	}
}

// checkStoreURL checks store.url without quoting it (it may hold a
// password).
func checkStoreURL(v *validator, s *Store) {
	u, err := url.Parse(s.URL)
	switch {
	case err != nil:
		v.add("store.url", "not a valid URL")
		return
	case u.Scheme != "redis" && u.Scheme != "rediss":
		v.add("store.url", "scheme must be redis or rediss (TLS)")
	case u.Host == "" && s.Sentinel == nil:
		v.add("store.url", "must include a host (redis://host:6379)")
	case u.RawQuery != "" || u.Fragment != "":
		v.add("store.url", "must not have a query or fragment")
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			v.add("store.url", "the path must be a database number (redis://host:6379/0)")
		}
	}
	if s.TLSCACertPath != "" && u.Scheme != "rediss" {
		v.add("store.url", "must be rediss:// when tls_ca_cert_path is set")
	}
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n <= 65535
}
