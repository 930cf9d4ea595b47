package config

import (
	"strings"
	"testing"
)

// invalidRegistry maps every testdata/registry/invalid-*.yaml file to the
// exact error Parse returns for it.
var invalidRegistry = map[string]string{
	"invalid-registry.yaml": lines(
		`registry.headers: invalid header name "Bad Header"`,
		`registry.headers.Authorization: invalid header value (it contains a control character)`,
		`registry.tls_ca_cert_path: must be an absolute path, got "certs/ca.pem"`,
		`registry.url: scheme must be http or https`,
	),
	"invalid-registry-http-ca.yaml": `registry.url: must be https:// when tls_ca_cert_path is set`,
}

func TestParseInvalidRegistry(t *testing.T) {
	checkInvalidFiles(t, "testdata/registry/invalid-*.yaml", invalidRegistry)
}

// TestRegistryKey: a private registry's url, headers and CA load, and its
// header values are secrets (kept out of the printed config).
func TestRegistryKey(t *testing.T) {
	doc := `registry:
  url: https://registry.example.com
  headers: {Authorization: "Bearer ${REGISTRY_TOKEN}"}
  tls_ca_cert_path: /etc/ssl/private-ca.pem
`
	cfg, err := Parse([]byte(doc), testEnv("REGISTRY_TOKEN", "rt-0123456789ab"))
	if err != nil {
		t.Fatal(err)
	}
	want := Registry{URL: "https://registry.example.com", Headers: map[string]string{"Authorization": "Bearer rt-0123456789ab"}, TLSCACertPath: "/etc/ssl/private-ca.pem"}
	if got := cfg.Registry; got.URL != want.URL || got.TLSCACertPath != want.TLSCACertPath || got.Headers["Authorization"] != want.Headers["Authorization"] {
		t.Errorf("registry = %+v, want %+v", got, want)
	}
	out, err := cfg.MarshalRedacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "rt-0123456789ab") {
		t.Errorf("MarshalRedacted shows the registry token:\n%s", out)
	}
	if !strings.Contains(strings.Join(cfg.Secrets(), "|"), "rt-0123456789ab") {
		t.Errorf("Secrets() lacks the registry token")
	}
}
