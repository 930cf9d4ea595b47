package config

import (
	"strconv"
	"strings"
	"testing"
)

// invalidTracingAudit maps every testdata/tracing/invalid-*.yaml file to the
// exact error Parse returns for it.
var invalidTracingAudit = map[string]string{
	"invalid-tracing.yaml": lines(
		`tracing.endpoint: scheme must be http or https (for example http://127.0.0.1:4318)`,
		`tracing.headers: invalid header name "Bad Header"`,
		`tracing.headers.X-Key: invalid header value (it contains a control character)`,
		`tracing.protocol: must be http/protobuf or grpc, got "http/json"`,
		`tracing.sample_ratio: must be between 0 and 1`,
		`tracing.service_name: contains a control character`,
	),
	"invalid-tracing-endpoint.yaml": lines(
		`tracing.endpoint: must not carry user info: put credentials in tracing.headers`,
		`tracing.sample_ratio: must be between 0 and 1`,
	),
	"invalid-audit.yaml": lines(
		`audit.arguments: must be digest, full or none, got "everything"`,
		`audit.max_bytes: must be at least 1024`,
		`audit.max_files: must be between 1 and 1000`,
		`audit.path: must be an absolute path, got "logs/audit.log"`,
	),
	"invalid-audit-tilde.yaml": lines(
		`audit.max_files: must be between 1 and 1000`,
		`audit.path: "~" is not expanded: write ${HOME} instead`,
	),
	"invalid-audit-dir.yaml": `audit.path: must name a file, got "/var/log/mcp-proxy/"`,
}

func TestParseInvalidTracingAudit(t *testing.T) {
	checkInvalidFiles(t, "testdata/tracing/invalid-*.yaml", invalidTracingAudit)
}

func TestTracingAuditDefaults(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		env  []string
		// want* are the values after Parse; "-" for the sample ratio means nil.
		wantProtocol, wantService, wantRatio string
		wantAudit                            Audit
	}{
		{
			name: "nothing set", doc: "",
			wantProtocol: "http/protobuf", wantService: "mcp-proxy", wantRatio: "1",
			wantAudit: Audit{MaxBytes: 104857600, MaxFiles: 10, Arguments: "digest"},
		},
		{
			name:         "config wins",
			doc:          "tracing: {endpoint: http://c:4317, protocol: grpc, service_name: gw, sample_ratio: 0.25}\naudit: {path: /var/log/a.log, max_bytes: 2048, max_files: 3, arguments: full}\n",
			env:          []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", "OTEL_SERVICE_NAME", "env", "OTEL_TRACES_SAMPLER", "always_off"},
			wantProtocol: "grpc", wantService: "gw", wantRatio: "0.25",
			wantAudit: Audit{Path: "/var/log/a.log", MaxBytes: 2048, MaxFiles: 3, Arguments: "full"},
		},
		{
			name:         "environment leaves keys unset for the SDK",
			doc:          "tracing: {endpoint: http://c:4318}\n",
			env:          []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc", "OTEL_SERVICE_NAME", "env", "OTEL_TRACES_SAMPLER", "always_off"},
			wantProtocol: "", wantService: "", wantRatio: "-",
			wantAudit: Audit{MaxBytes: 104857600, MaxFiles: 10, Arguments: "digest"},
		},
		{
			name:         "service.name in OTEL_RESOURCE_ATTRIBUTES",
			doc:          "",
			env:          []string{"OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod, service.name=gw"},
			wantProtocol: "http/protobuf", wantService: "", wantRatio: "1",
			wantAudit: Audit{MaxBytes: 104857600, MaxFiles: 10, Arguments: "digest"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.doc), testEnv(tt.env...))
			if err != nil {
				t.Fatal(err)
			}
			tr := cfg.Tracing
			ratio := "-"
			if tr.SampleRatio != nil {
				ratio = strconv.FormatFloat(*tr.SampleRatio, 'g', -1, 64)
			}
			if tr.Protocol != tt.wantProtocol || tr.ServiceName != tt.wantService || ratio != tt.wantRatio {
				t.Errorf("tracing = protocol %q, service %q, ratio %s; want %q, %q, %s",
					tr.Protocol, tr.ServiceName, ratio, tt.wantProtocol, tt.wantService, tt.wantRatio)
			}
			if cfg.Audit != tt.wantAudit {
				t.Errorf("audit = %+v, want %+v", cfg.Audit, tt.wantAudit)
			}
		})
	}
}

func TestAuditExplicitZeroIsJudged(t *testing.T) {
	_, err := Parse([]byte("audit: {path: /tmp/a.log, max_bytes: 0, max_files: 0}\n"), testEnv())
	want := lines(`audit.max_bytes: must be at least 1024`, `audit.max_files: must be between 1 and 1000`)
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want\n%s", err, want)
	}
}

func TestTracingHeadersAreSecret(t *testing.T) {
	_, err := Parse([]byte("tracing: {endpoint: http://c:4318, headers: {x-key: \"${TOKEN}\"}, protocol: nope}\n"), testEnv())
	if err == nil || strings.Contains(err.Error(), testSecret) {
		t.Fatalf("err = %v; want an error without the header value", err)
	}
}
