package tracing

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/otlptest"
)

// clearOTELEnv unsets every variable these tests and the SDK look at, for
// the test's duration.
func clearOTELEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT",
		"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
		"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"} {
		t.Setenv(k, "")
	}
}

func ratio(r float64) *float64 { return &r }

// exportOne starts and ends one client span through a Tracer built by New
// and shuts it down, which flushes the span to the collector.
func exportOne(t *testing.T, cfg config.Tracing) {
	t.Helper()
	tr, err := New(context.Background(), cfg, Options{Version: "1.2.3"})
	if err != nil || tr == nil {
		t.Fatalf("New = %v, %v; want a Tracer", tr, err)
	}
	_, s := tr.StartClient(context.Background(), ClientRequest{Method: "tools/call", Params: []byte(`{"name":"echo"}`), ID: "px-1", Server: "fx"})
	s.End(OutcomeOK, 0)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func checkExported(t *testing.T, rcv *otlptest.Receiver, service string) {
	t.Helper()
	spans := rcv.Wait(t, 10*time.Second, func(s []otlptest.Span) bool { return len(s) > 0 })
	s := spans[0]
	if len(spans) != 1 || s.Name != "tools/call echo" || s.Kind != "client" || s.Service != service ||
		s.Attributes["mcp_proxy.server"] != "fx" || s.Attributes["jsonrpc.request.id"] != "px-1" {
		t.Errorf("collector got:\n%s\nwant one client span \"tools/call echo\" of service %q", otlptest.Tree(spans), service)
	}
}

func TestNewExportsToCollector(t *testing.T) {
	t.Run("http/protobuf from the config", func(t *testing.T) {
		clearOTELEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-env=ignored")
		rcv := otlptest.NewHTTP(t)
		exportOne(t, config.Tracing{Endpoint: rcv.Endpoint(), Protocol: "http/protobuf", ServiceName: "gw",
			SampleRatio: ratio(1), Headers: map[string]string{"X-Key": "k-123456"}})
		checkExported(t, rcv, "gw")
		h := rcv.Header()
		if h.Get("X-Key") != "k-123456" || h.Get("X-Env") != "" {
			t.Errorf("collector saw headers %v; want tracing.headers to replace OTEL_EXPORTER_OTLP_HEADERS", h)
		}
	})
	t.Run("grpc from the config", func(t *testing.T) {
		clearOTELEnv(t)
		rcv := otlptest.NewGRPC(t)
		exportOne(t, config.Tracing{Endpoint: rcv.Endpoint(), Protocol: "grpc", ServiceName: "gw-grpc",
			Headers: map[string]string{"x-key": "g-123456"}})
		checkExported(t, rcv, "gw-grpc")
		if got := rcv.Header().Get("x-key"); got != "g-123456" {
			t.Errorf("gRPC metadata x-key = %q", got)
		}
	})
	t.Run("environment only", func(t *testing.T) {
		clearOTELEnv(t)
		rcv := otlptest.NewGRPC(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		t.Setenv("OTEL_SERVICE_NAME", "from-env")
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-env=e-123456")
		exportOne(t, config.Tracing{})
		checkExported(t, rcv, "from-env")
		if got := rcv.Header().Get("x-env"); got != "e-123456" {
			t.Errorf("gRPC metadata x-env = %q, want the variable's header", got)
		}
	})
	t.Run("config endpoint with a path is used as is", func(t *testing.T) {
		clearOTELEnv(t)
		rcv := otlptest.NewHTTP(t)
		exportOne(t, config.Tracing{Endpoint: rcv.Endpoint() + "/v1/traces", ServiceName: "p"})
		checkExported(t, rcv, "p")
	})
	t.Run("config wins over the environment", func(t *testing.T) {
		clearOTELEnv(t)
		rcv := otlptest.NewHTTP(t)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		t.Setenv("OTEL_SERVICE_NAME", "from-env")
		t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
		exportOne(t, config.Tracing{Endpoint: rcv.Endpoint(), Protocol: "http/protobuf", ServiceName: "from-config", SampleRatio: ratio(1)})
		checkExported(t, rcv, "from-config")
	})
	t.Run("http/json from the environment", func(t *testing.T) {
		clearOTELEnv(t)
		rcv := otlptest.NewHTTP(t)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
		exportOne(t, config.Tracing{Endpoint: rcv.Endpoint(), ServiceName: "js"})
		checkExported(t, rcv, "js")
		if ct := rcv.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
	})
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Run("config http/protobuf wins over "+v+"=http/json", func(t *testing.T) {
			clearOTELEnv(t)
			rcv := otlptest.NewHTTP(t)
			t.Setenv(v, "http/json")
			exportOne(t, config.Tracing{Endpoint: rcv.Endpoint(), Protocol: "http/protobuf", ServiceName: "pb", SampleRatio: ratio(1)})
			checkExported(t, rcv, "pb")
		})
	}
}

func TestNewOff(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		cfg     config.Tracing
		wantErr error
	}{
		{name: "nothing set"},
		{name: "keys without an endpoint", cfg: config.Tracing{Protocol: "grpc", SampleRatio: ratio(1), ServiceName: "x"}},
		{name: "OTEL_SDK_DISABLED", env: map[string]string{"OTEL_SDK_DISABLED": "true"}, cfg: config.Tracing{Endpoint: "http://127.0.0.1:1"}},
		{name: "OTEL_TRACES_EXPORTER=none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{name: "unsupported exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, cfg: config.Tracing{Endpoint: "http://127.0.0.1:1"}, wantErr: ErrUnsupported},
		{name: "unsupported sampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, cfg: config.Tracing{Endpoint: "http://127.0.0.1:1"}, wantErr: ErrUnsupported},
		{name: "sampler ratio above 1", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, cfg: config.Tracing{Endpoint: "http://127.0.0.1:1"}, wantErr: ErrUnsupported},
		{name: "unsupported protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, wantErr: ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearOTELEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tr, err := New(context.Background(), tt.cfg, Options{})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New error %v, want %v", err, tt.wantErr)
			}
			if tr != nil {
				_ = tr.Shutdown(context.Background())
				t.Fatalf("New returned a Tracer; want tracing off")
			}
			if tr.Enabled() {
				t.Error("a nil Tracer reports Enabled")
			}
		})
	}
}

func TestShutdownIsBounded(t *testing.T) {
	clearOTELEnv(t)
	// A collector that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	})
	var logs bytes.Buffer
	endpoint := "http://" + ln.Addr().String()
	tr, err := New(context.Background(), config.Tracing{Endpoint: endpoint, Protocol: "http/protobuf"},
		Options{Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"endpoint":"`+endpoint+`/v1/traces"`) {
		t.Errorf("start line: %s", logs.String())
	}
	_, s := tr.StartServer(context.Background(), ServerRequest{Method: "ping"})
	s.End(OutcomeOK, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	first := tr.Shutdown(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %s with a 200ms ctx", d)
	}
	if first == nil {
		t.Error("Shutdown reported no error although the collector never answered")
	}
	if err := tr.Shutdown(context.Background()); err != first {
		t.Errorf("second Shutdown = %v, want the first one's result %v", err, first)
	}
}
