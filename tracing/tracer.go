package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// instrumentationName names the proxy's tracer (the instrumentation scope).
const instrumentationName = "github.com/mcp-proxy/mcp-proxy"

// ShutdownBudget bounds Shutdown's flush when the caller's ctx has no
// earlier deadline: the shutdown (docs/operations.md#shutdown-and-reload) must end within 15 s, of
// which in-flight calls take 10.
const ShutdownBudget = 3 * time.Second

// errorLogInterval is the least time between two logged export errors: a
// collector that is down fails every batch, every few seconds.
const errorLogInterval = time.Minute

// defaultHTTPPath is where an OTLP/HTTP collector takes traces.
const defaultHTTPPath = "/v1/traces"

// Protocols an exporter speaks (OTLP's names).
const (
	protoHTTP     = "http/protobuf"
	protoHTTPJSON = "http/json"
	protoGRPC     = "grpc"
)

// ErrUnsupported is returned by New for an OTEL_* setting the proxy cannot
// honour (an exporter other than otlp, an unknown protocol).
var ErrUnsupported = errors.New("tracing: unsupported setting")

// Options are New's dependencies. The zero value is usable.
type Options struct {
	// Logger receives the start line and export errors. The zero Logger
	// discards them.
	Logger zerolog.Logger
	// Version is the service.version resource attribute; "" leaves it out.
	Version string
	// LookupEnv reads the OTEL_* variables New decides with; nil means
	// os.LookupEnv. The SDK reads the rest of its variables from the
	// process environment itself.
	LookupEnv func(string) (string, bool)
}

// Tracer starts the proxy's spans and propagates their context. A nil
// *Tracer is tracing turned off (see the package doc). All methods are
// safe for concurrent use.
type Tracer struct {
	sampler sdktrace.Sampler
	batch   *batcher
	prop    propagation.TraceContext
	log     zerolog.Logger
	names   spanNames

	shutdownOnce sync.Once
	shutdownErr  error
}

// New returns the Tracer of cfg (defaults applied) and the environment, or
// nil and no error when tracing is off. It builds the exporter without
// connecting: a collector that is down shows as export errors in the log,
// never as a failed start. It sets the process-wide OpenTelemetry error
// handler to log through opts.Logger.
func New(ctx context.Context, cfg config.Tracing, opts Options) (*Tracer, error) {
	env := opts.LookupEnv
	if env == nil {
		env = os.LookupEnv
	}
	on, err := enabled(cfg, env)
	if err != nil || !on {
		return nil, err
	}
	var sampler sdktrace.Sampler
	if r := cfg.SampleRatio; r != nil {
		sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*r))
	} else if sampler, err = samplerFrom(env); err != nil {
		return nil, err
	}
	bc, bcErr := batchConfigFrom(env)
	res, err := newResource(ctx, cfg, opts.Version)
	if err != nil {
		return nil, err
	}
	exp, endpoint, err := newExporter(ctx, cfg, env, res, bc.limits)
	if err != nil {
		return nil, err
	}
	errs := newErrorLogger(opts.Logger)
	otel.SetErrorHandler(errs) // the OTLP clients report through it too
	t := newTracer(exp, sampler, bc, opts.Logger, errs.Handle)
	if bcErr != nil {
		opts.Logger.Warn().Err(bcErr).Msg("tracing: OTEL_BSP_* or attribute limit variable ignored")
	}
	ev := opts.Logger.Info().Str("protocol", protocolOf(cfg, env))
	if endpoint != "" {
		ev = ev.Str("endpoint", endpoint)
	}
	ev.Msg("tracing on: exporting OpenTelemetry traces")
	return t, nil
}

// newTracer builds a Tracer exporting through exp; tests give it an
// exporter of their own.
func newTracer(exp spanExporter, sampler sdktrace.Sampler, bc batchConfig, log zerolog.Logger, report func(error)) *Tracer {
	return &Tracer{
		sampler: sampler,
		batch:   newBatcher(bc, exp, report),
		log:     log,
	}
}

// Shutdown flushes the spans still queued and stops the exporter, bounded
// by ctx and by ShutdownBudget. Later calls return the first one's result.
// A nil Tracer returns nil.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.shutdownOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, ShutdownBudget)
		defer cancel()
		if err := t.batch.shutdown(ctx); err != nil {
			t.shutdownErr = fmt.Errorf("tracing: flush at shutdown: %w", err)
		}
	})
	return t.shutdownErr
}

// Enabled reports whether t exports spans (t is not nil).
func (t *Tracer) Enabled() bool { return t != nil }

// enabled decides whether tracing is on (see the package doc).
func enabled(cfg config.Tracing, env func(string) (string, bool)) (bool, error) {
	get := func(k string) string {
		v, _ := env(k)
		return strings.TrimSpace(v)
	}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exp := get("OTEL_TRACES_EXPORTER"); strings.ToLower(exp) {
	case "none":
		return false, nil
	case "", "otlp":
	default:
		return false, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%s (the proxy exports otlp, or none)", ErrUnsupported, exp)
	}
	return cfg.Endpoint != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_ENDPOINT") != "", nil
}

// protocolOf is the exporter protocol: config, then the two variables,
// then http/protobuf.
func protocolOf(cfg config.Tracing, env func(string) (string, bool)) string {
	if cfg.Protocol != "" {
		return cfg.Protocol
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v, _ := env(k); strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return protoHTTP
}

// newExporter builds the OTLP exporter. It returns the endpoint from the
// config for the start line ("" when the SDK takes it from a variable).
func newExporter(ctx context.Context, cfg config.Tracing, env func(string) (string, bool), res *resource.Resource, lim attrLimits) (*wireExporter, string, error) {
	var u *url.URL
	if cfg.Endpoint != "" {
		var err error
		if u, err = url.Parse(cfg.Endpoint); err != nil {
			return nil, "", fmt.Errorf("tracing.endpoint: %w", err)
		}
	}
	var (
		proto = protocolOf(cfg, env)
		exp   *wireExporter
		kind  string // for the error text
		err   error
	)
	switch proto {
	case protoHTTP, protoHTTPJSON:
		// The encoding is always given: the client otherwise takes it from
		// OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, and spans encoded as
		// unknown fields would go as empty JSON objects.
		opts := []otlptracehttp.Option{otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf)}
		if proto == protoHTTPJSON {
			opts[0] = otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON)
		}
		if u != nil {
			v := *u
			if v.Path == "" || v.Path == "/" {
				v.Path = defaultHTTPPath
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(v.String()))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		kind = "OTLP/HTTP"
		exp, err = newWireExporter(ctx, otlptracehttp.NewClient(opts...), res, proto == protoHTTPJSON, lim)
	case protoGRPC:
		var opts []otlptracegrpc.Option
		if u != nil {
			opts = append(opts, otlptracegrpc.WithEndpointURL(u.String()))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		kind = "OTLP/gRPC"
		exp, err = newWireExporter(ctx, otlptracegrpc.NewClient(opts...), res, false, lim)
	default:
		return nil, "", fmt.Errorf("%w: OTLP protocol %q (http/protobuf, grpc or http/json)", ErrUnsupported, proto)
	}
	if err != nil {
		return nil, "", fmt.Errorf("tracing: %s exporter: %w", kind, err)
	}
	return exp, endpointText(u, proto), nil
}

// endpointText is the configured endpoint as the exporter uses it, for the
// log; "" when a variable gives it.
func endpointText(u *url.URL, proto string) string {
	if u == nil {
		return ""
	}
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if proto != protoGRPC && (v.Path == "" || v.Path == "/") {
		v.Path = defaultHTTPPath
	}
	if proto == protoGRPC {
		v.Path = ""
	}
	return v.String()
}

// newResource describes the proxy: the SDK's own attributes, then
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, then the config's
// service_name and the version, later ones winning.
func newResource(ctx context.Context, cfg config.Tracing, version string) (*resource.Resource, error) {
	var attrs = []resource.Option{resource.WithTelemetrySDK(), resource.WithFromEnv()}
	if cfg.ServiceName != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceName(cfg.ServiceName)))
	}
	if version != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(version)))
	}
	res, err := resource.New(ctx, attrs...)
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// A partly malformed OTEL_RESOURCE_ATTRIBUTES still yields the rest.
	return res, nil
}

// errorLogger logs export errors (the OTLP clients' report through
// OpenTelemetry's error handler) and the recorder's drop reports at most
// once per errorLogInterval, with the number held back since.
type errorLogger struct {
	log        zerolog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newErrorLogger(log zerolog.Logger) *errorLogger { return &errorLogger{log: log} }

// Handle implements otel.ErrorHandler.
func (e *errorLogger) Handle(err error) {
	e.mu.Lock()
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < errorLogInterval {
		e.suppressed++
		e.mu.Unlock()
		return
	}
	held := e.suppressed
	e.last, e.suppressed = now, 0
	e.mu.Unlock()
	e.log.Warn().Err(err).Int("errors_not_logged", held).Msg("tracing: OpenTelemetry export error")
}
