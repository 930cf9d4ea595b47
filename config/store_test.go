package config

import (
	"strings"
	"testing"
)

// storeKey is a valid store.encryption_key (32 bytes of 0x01, base64).
const storeKey = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="

// TestStoreDefaults: no store key means the memory store with the default
// prefix; a redis store keeps what the file says.
func TestStoreDefaults(t *testing.T) {
	cfg, err := Parse([]byte("servers: {}\n"), testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.Type != "memory" || cfg.Store.KeyPrefix != "mcp-proxy:" {
		t.Errorf("store = %+v, want memory with prefix mcp-proxy:", cfg.Store)
	}
	doc := "store:\n  type: redis\n  url: rediss://:${PW}@redis.example.com:6380/2\n  key_prefix: \"team-a:\"\n" +
		"  encryption_key: ${KEY}\n  tls_ca_cert_path: /etc/ssl/redis-ca.pem\n  sentinel: {master: main, addrs: [\"10.0.0.1:26379\", \"[::1]:26380\"]}\n"
	cfg, err = Parse([]byte(doc), testEnv("PW", "redis-pw-0123456789", "KEY", storeKey))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Store
	if s.Type != "redis" || s.URL != "rediss://:redis-pw-0123456789@redis.example.com:6380/2" || s.KeyPrefix != "team-a:" ||
		s.EncryptionKey != storeKey || s.TLSCACertPath != "/etc/ssl/redis-ca.pem" || s.Sentinel == nil ||
		s.Sentinel.Master != "main" || len(s.Sentinel.Addrs) != 2 {
		t.Errorf("store = %+v", s)
	}
}

// TestStoreProblems maps store sections to the exact problems Parse
// reports.
func TestStoreProblems(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"redis without a key", "store: {type: redis, url: redis://127.0.0.1:6379}\n", []string{
			`store.encryption_key: required with type redis: 32 bytes, base64, from a secret (for example "${MCP_PROXY_STORE_KEY}"; make one with: openssl rand -base64 32)`,
		}},
		{"redis without a url", "store: {type: redis, encryption_key: " + storeKey + "}\n", []string{
			`store.url: required with type redis (redis://host:6379 or rediss://host:6380)`,
		}},
		{"short key", "store: {type: redis, url: redis://h:1, encryption_key: c2hvcnQ=}\n", []string{
			`store.encryption_key: must be 32 bytes once decoded, got 5 (make one with: openssl rand -base64 32)`,
		}},
		{"not base64", "store: {type: redis, url: redis://h:1, encryption_key: \"not base64!\"}\n", []string{
			`store.encryption_key: not valid base64 (make one with: openssl rand -base64 32)`,
		}},
		{"unknown type", "store: {type: etcd}\n", []string{`store.type: must be memory or redis, got "etcd"`}},
		{"memory with redis keys", "store: {url: redis://h:1, encryption_key: " + storeKey + ", tls_ca_cert_path: /ca.pem, sentinel: {master: m, addrs: [\"h:1\"]}}\n", []string{
			`store.encryption_key: only for type redis`,
			`store.sentinel: only for type redis`,
			`store.tls_ca_cert_path: only for type redis`,
			`store.url: only for type redis`,
		}},
		{"bad url", "store: {type: redis, url: \"http://h:1\", encryption_key: " + storeKey + "}\n", []string{
			`store.url: scheme must be redis or rediss (TLS)`,
		}},
		{"url without host", "store: {type: redis, url: \"redis:///0\", encryption_key: " + storeKey + "}\n", []string{
			`store.url: must include a host (redis://host:6379)`,
		}},
		{"url with query and bad db", "store: {type: redis, url: \"redis://h:1/x?a=b\", encryption_key: " + storeKey + "}\n", []string{
			`store.url: must not have a query or fragment`,
			`store.url: the path must be a database number (redis://host:6379/0)`,
		}},
		{"ca without tls", "store: {type: redis, url: \"redis://h:1\", encryption_key: " + storeKey + ", tls_ca_cert_path: ca.pem}\n", []string{
			`store.tls_ca_cert_path: must be an absolute path, got "ca.pem"`,
			`store.url: must be rediss:// when tls_ca_cert_path is set`,
		}},
		{"sentinel", "store: {type: redis, url: \"redis://m\", encryption_key: " + storeKey + ", sentinel: {addrs: [\"h\", \"h:99999\"]}}\n", []string{
			`store.sentinel.addrs[0]: must be host:port, got "h"`,
			`store.sentinel.addrs[1]: must be host:port, got "h:99999"`,
			`store.sentinel.master: required: the name the sentinels know the master by`,
		}},
		{"sentinel without addrs", "store: {type: redis, url: \"redis://m\", encryption_key: " + storeKey + ", sentinel: {master: m}}\n", []string{
			`store.sentinel.addrs: required: host:port of at least one sentinel`,
		}},
		{"prefix with a space", "store: {key_prefix: \"a b\"}\n", []string{`store.key_prefix: must not contain spaces or control characters`}},
		{"unknown key", "store: {type: redis, url: redis://h:1, encryption_key: " + storeKey + ", cluster: true}\n", []string{
			`store.cluster: unknown key`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), testEnv())
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if got, want := err.Error(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("error\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestStoreSecrets: the store's key and the password of its URL are
// secrets: listed, redacted in the printed config, and never in an error
// text, whether written in the file or from the environment.
func TestStoreSecrets(t *testing.T) {
	const pw = "redis-pw-0123456789"
	doc := "store:\n  type: redis\n  url: redis://proxy:" + pw + "@redis.example.com:6379/0\n  encryption_key: ${KEY}\n"
	cfg, err := Parse([]byte(doc), testEnv("KEY", storeKey))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cfg.Secrets(), "|")
	for _, s := range []string{storeKey, pw} {
		if !strings.Contains(got, s) {
			t.Errorf("Secrets() lacks %s: %s", s, got)
		}
	}
	out, err := cfg.MarshalRedacted()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{storeKey, pw} {
		if strings.Contains(string(out), s) {
			t.Errorf("MarshalRedacted shows %s:\n%s", s, out)
		}
	}
	if !strings.Contains(string(out), "url: redis://proxy:[REDACTED]@redis.example.com:6379/0") {
		t.Errorf("MarshalRedacted lost the URL's other parts:\n%s", out)
	}

	// Errors: a bad key from the environment, and a document that does not
	// decode, where the secrets come from the node tree.
	for name, doc := range map[string]string{
		"bad key from env":  "store: {type: redis, url: \"redis://u:" + pw + "@h:1/x\", encryption_key: \"${KEY}!\"}\n",
		"undecodable":       "store: {type: redis, url: \"redis://u:" + pw + "@h:1\", encryption_key: " + storeKey + ", key_prefix: [" + storeKey + "]}\nnaming: " + pw + "\n",
		"key var quoted":    "store: {type: redis, url: \"redis://h:1\", encryption_key: \"x${KEY}\"}\nnaming: ${KEY}\n",
		"url from env kind": "store: {type: redis, url: \"${URL}\", encryption_key: \"x\"}\nnaming: " + "${URL}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(doc), testEnv("KEY", storeKey, "URL", "redis://u:"+pw+"@h:1"))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			// Quoted values are cut at 40 characters: look for a part.
			for _, s := range []string{storeKey[:24], pw} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error shows %s:\n%s", s, err)
				}
			}
		})
	}
}
