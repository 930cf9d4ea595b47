package config

import (
	"math"
	"net/url"
	"strings"
)

// Tracing defaults (docs/operations.md#traces). Each applies only when neither the config
// nor the matching OTEL_* variable says otherwise: a key written in the
// file wins over the environment, the environment wins over these.
const (
	// DefaultTracingProtocol is OTLP's own default transport.
	DefaultTracingProtocol = "http/protobuf"
	// DefaultTracingServiceName names the proxy in trace backends.
	DefaultTracingServiceName = "mcp-proxy"
	// DefaultTracingSampleRatio keeps every trace: a proxy's traffic is
	// small next to what collectors take, and a dropped trace is the one
	// someone was looking for.
	DefaultTracingSampleRatio = 1.0
)

// Tracing protocols (Tracing.Protocol).
const (
	TracingHTTP = "http/protobuf"
	TracingGRPC = "grpc"
)

var tracingProtocols = []string{TracingHTTP, TracingGRPC}

// tracingDefaults fills the tracing keys the file left out, unless the
// OpenTelemetry variable that sets the same thing is present: the tracing
// package (the sampler, the protocol) or the SDK (the resource) reads those
// itself, and a default here would shadow them.
func (c *Config) tracingDefaults(lookupEnv func(string) (string, bool)) {
	t := &c.Tracing
	has := func(names ...string) bool {
		for _, n := range names {
			if v, ok := lookupEnv(n); ok && v != "" {
				return true
			}
		}
		return false
	}
	if t.Protocol == "" && !has("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Protocol = DefaultTracingProtocol
	}
	if t.SampleRatio == nil && !has("OTEL_TRACES_SAMPLER") {
		r := DefaultTracingSampleRatio
		t.SampleRatio = &r
	}
	if t.ServiceName == "" && !has("OTEL_SERVICE_NAME") && !resourceNamesService(lookupEnv) {
		t.ServiceName = DefaultTracingServiceName
	}
}

// resourceNamesService reports whether OTEL_RESOURCE_ATTRIBUTES sets
// service.name (a comma-separated list of key=value).
func resourceNamesService(lookupEnv func(string) (string, bool)) bool {
	v, _ := lookupEnv("OTEL_RESOURCE_ATTRIBUTES")
	for _, kv := range strings.Split(v, ",") {
		k, _, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == "service.name" {
			return true
		}
	}
	return false
}

func (c *Config) validateTracing(v *validator) {
	t := &c.Tracing
	if t.Endpoint != "" {
		checkTracingEndpoint(v, "tracing.endpoint", t.Endpoint)
	}
	if t.Protocol != "" {
		v.oneOf("tracing.protocol", t.Protocol, tracingProtocols)
	}
	checkHeaders(v, "tracing.headers", t.Headers)
	if r := t.SampleRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		v.add("tracing.sample_ratio", "must be between 0 and 1")
	}
	if strings.ContainsFunc(t.ServiceName, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		v.add("tracing.service_name", "contains a control character")
	}
}

// checkTracingEndpoint accepts an http or https URL with a host and no
// user info (credentials go in tracing.headers, which are kept secret).
func checkTracingEndpoint(v *validator, path, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		v.add(path, "not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		v.add(path, "scheme must be http or https (for example http://127.0.0.1:4318)")
	case u.Host == "":
		v.add(path, "must include a host")
	case u.User != nil:
		v.add(path, "must not carry user info: put credentials in tracing.headers")
	case u.RawQuery != "" || u.Fragment != "":
		v.add(path, "must not have a query or fragment")
	}
}
