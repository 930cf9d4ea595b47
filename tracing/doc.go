// Package tracing exports the proxy's OpenTelemetry traces (docs/operations.md#traces): a
// server span per downstream request, a client span per upstream request,
// and W3C trace context carried across both hops.
//
// A *Tracer comes from New, from the `tracing` config key and the standard
// OTEL_* variables. A nil *Tracer is tracing turned off: every method is a
// no-op that returns its input, allocates nothing and takes no lock, so the
// call path pays one nil check. Callers hold a *Tracer and never test for
// nil themselves.
//
// Configuration precedence: a key written in the config file wins over the
// environment, the environment wins over the defaults. Tracing is on when
// tracing.endpoint is set or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is; OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn it off whatever the file says. Keys the
// file leaves out are read from OpenTelemetry's variables: by the SDK's
// OTLP client (endpoint, headers, timeout, compression, TLS files) and
// resource, and by this package as the SDK reads them (sampler, batch
// processor, span attribute limits). The protocol is tracing.protocol,
// else OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf; grpc and http/json (variables only) are the others.
// tracing.endpoint is a URL; for http/protobuf a URL without a path gets
// /v1/traces, one with a path is used as it is (like the two OTLP endpoint
// variables respectively); for grpc only scheme, host and port count, and
// http:// means no TLS. tracing.headers replace OTEL_EXPORTER_OTLP_HEADERS
// when set. tracing.sample_ratio r samples ParentBased(TraceIDRatio(r)): a
// request whose parent is sampled is traced whatever r says.
//
// Spans never carry arguments, results or resource URIs: names are
// "<method> <target>" where the target is a tool or prompt name, else just
// "<method>", and the attributes are those of OpenTelemetry's MCP semantic
// conventions (semconv v1.41.0, the last release of the Go module that has
// them) plus mcp_proxy.agent, mcp_proxy.server, mcp_proxy.outcome,
// mcp_proxy.policy.rule and mcp_proxy.approval.
//
// Context: StartServer continues a trace from the request's HTTP headers
// (traceparent, tracestate), overridden by params._meta.traceparent and
// tracestate when present (the message is more specific than the HTTP
// request that carried it). InjectMeta writes the current span's context
// into an upstream request's params._meta without re-encoding the rest;
// InjectHeader writes it into an HTTP request's headers.
//
// Spans are recorded by this package (recorder.go says why) and go to the
// collector through a batch processor that drops, never blocks, when the
// collector is slow. Shutdown flushes what is queued, bounded by its ctx.
// Export errors and drops are logged at most once a minute. The spans are
// encoded by this package (wire.go) into the bytes the SDK's exporter
// would send, and posted by the SDK's OTLP client of the protocol.
package tracing
