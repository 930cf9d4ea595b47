package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
)

// A feature is one part of the proxy a deployment turns on (issue 38): the
// feature scenarios compare a proxy with all of them, or with one, against
// a bare proxy with none, in the same rounds.
type feature string

// The features, in report order.
const (
	// featOAuth: listen.auth with JWTs from the load test's own issuer
	// (issuer.go), its keys fetched once and cached. HTTP only: over stdio
	// there is no listener.
	featOAuth feature = "oauth"
	// featAudit: audit with arguments: digest to a file in the run's
	// temporary directory.
	featAudit feature = "audit"
	// featTracing: tracing over OTLP/HTTP (the batch exporter) to a sink
	// that accepts and discards (otlpsink.go), whose CPU is reported.
	featTracing feature = "tracing"
	// featRateLimit: an agent rate limit on every tool that never trips.
	featRateLimit feature = "ratelimit"
	// featPinning: pinning: quarantine with scan: warn.
	featPinning feature = "pinning"
	// featOverride: an override of the called tool's title, description
	// and annotations (its name stays, so the call is the same).
	featOverride feature = "override"
	// featStatus: the metrics listener, and with it the status page.
	featStatus feature = "status"
)

// allFeatures is every feature, in report order.
var allFeatures = []feature{featOAuth, featAudit, featTracing, featRateLimit, featPinning, featOverride, featStatus}

// Side names of the feature scenarios.
const (
	// sideBare is the proxy with pinning: off and none of the features
	// (scan stays at its default, warn: the config has no off).
	sideBare = "bare"
	// sideFull is the proxy with every feature the transport has.
	sideFull = "full"
)

// neverTrips is the agent rate limit of featRateLimit: calls a minute far
// beyond what two cores can send.
const neverTrips = 1_000_000_000

// loadAgent is the agent of a config with featOAuth or featRateLimit, and
// loadSubject the subject of the issuer's tokens that its match names.
const (
	loadAgent   = "load"
	loadSubject = "loadtest"
)

// featuresFor is the features of a proxy over HTTP (httpListener) or stdio:
// stdio has no listener, so no OAuth.
func featuresFor(httpListener bool, fs []feature) []feature {
	if httpListener {
		return fs
	}
	return slices.DeleteFunc(slices.Clone(fs), func(f feature) bool { return f == featOAuth })
}

// featureEnv is what proxies with features need running beside them: the
// token issuer, started on first use and shared, and an OTLP sink per
// proxy that traces (so that each side's exports are counted on its own).
type featureEnv struct {
	e      *env
	cl     *closers
	issuer *issuer
	sink   *proc  // the sink of the proxy withFeatures configured last
	sinkTo string // its URL
}

// withFeatures returns the config mutation that turns fs on, starting what
// they need.
func (fe *featureEnv) withFeatures(ctx context.Context, fs []feature, httpListener bool, upstream string) (func(*proxyConfig), error) {
	fe.sink, fe.sinkTo = nil, ""
	if slices.Contains(fs, featOAuth) && fe.issuer == nil {
		is, err := startIssuer()
		if err != nil {
			return nil, err
		}
		fe.issuer = is
		*fe.cl = append(*fe.cl, is.close)
	}
	if slices.Contains(fs, featTracing) {
		self, err := selfPath()
		if err != nil {
			return nil, err
		}
		p, u, err := fe.e.fleet.startReady(ctx, procSpec{name: roleOTLPSink, path: self, env: roleEnvOf(roleOTLPSink), ready: sinkURL})
		if err != nil {
			if p != nil {
				err = fmt.Errorf("%w (%v)", err, p.stop())
			}
			return nil, err
		}
		fe.sink, fe.sinkTo = p, u
		*fe.cl = append(*fe.cl, p.stop)
	}
	fe.e.configs++
	auditPath := filepath.Join(fe.e.dir, "audit-"+strconv.Itoa(fe.e.configs)+".jsonl")
	return func(c *proxyConfig) {
		// Pins per upstream: both upstreams' echo tools are fx's echo,
		// with different definitions, and pinning: quarantine would hold
		// the second one a run meets.
		c.StateDir = filepath.Join(fe.e.dir, "state-features-"+upstream)
		// scan has no off: the bare proxy keeps its default (warn), which
		// reads descriptions when the catalog is built, never on a call.
		c.Pinning = "off"
		var agent *agentConfig
		needAgent := func() *agentConfig {
			if agent == nil {
				agent = &agentConfig{MCPBundles: []string{"all"}}
				c.Bundles = map[string]bundleConfig{"all": {Servers: serverNames(c.Servers)}}
				c.Agents = map[string]*agentConfig{loadAgent: agent}
				c.DefaultAgent = loadAgent
			}
			return agent
		}
		for _, f := range fs {
			switch f {
			case featOAuth:
				if httpListener {
					c.Listen = &listenConfig{Auth: &listenAuthConfig{Issuer: fe.issuer.url, Audience: issuerAudience}}
					needAgent().Match = map[string][]string{"sub": {loadSubject}}
				}
			case featAudit:
				c.Audit = map[string]string{"path": auditPath, "arguments": "digest"}
			case featTracing:
				c.Tracing = map[string]string{"endpoint": fe.sinkTo, "protocol": "http/protobuf"}
			case featRateLimit:
				needAgent().Limits = []limitConfig{{Tools: []string{"*"}, PerMinute: neverTrips}}
			case featPinning:
				c.Pinning, c.Scan = "quarantine", "warn"
			case featOverride:
				for name, sc := range c.Servers {
					sc.Tools.Overrides = map[string]overrideConfig{"echo": {
						Title:       "Echo",
						Description: "Echoes the text it is given.",
						Annotations: map[string]bool{"readOnlyHint": true},
					}}
					c.Servers[name] = sc
				}
			case featStatus:
				c.Metrics = map[string]string{"listen": loopback + ":0"}
			}
		}
	}, nil
}

// token is the bearer token a client of a proxy with fs sends ("" none).
func (fe *featureEnv) token(fs []feature, httpListener bool) (string, error) {
	if !httpListener || !slices.Contains(fs, featOAuth) {
		return "", nil
	}
	return fe.issuer.token(loadSubject)
}

func serverNames(servers map[string]serverConfig) []string {
	var out []string
	for n := range servers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// featureSide is one proxy of a feature scenario: its name, the features
// it has on.
type featureSide struct {
	name     string
	features []feature
}

// fullAndBare are the sides of the everything-on scenarios.
func fullAndBare(bool) []featureSide {
	return []featureSide{{sideBare, nil}, {sideFull, allFeatures}}
}

// eachFeature are the sides of the per-feature scenarios: bare, and one
// proxy per feature the transport has with that feature alone.
func eachFeature(httpListener bool) []featureSide {
	sides := []featureSide{{sideBare, nil}}
	for _, f := range featuresFor(httpListener, allFeatures) {
		sides = append(sides, featureSide{string(f), []feature{f}})
	}
	return sides
}

// featureCalls measures tools/call of echo through proxies with features
// on (sides gives them) over Streamable HTTP (httpListener) or stdio, at
// concurrency conc, every proxy with its own upstream process and all in
// the same rounds. The OTLP sink's CPU per call is reported on the sides
// that trace.
func featureCalls(httpListener bool, conc int, sides func(bool) []featureSide) func(context.Context, *env, string) (*result, error) {
	return func(ctx context.Context, e *env, u string) (res *result, err error) {
		var cl closers
		defer joinErr(&err, cl.close)
		fe := &featureEnv{e: e, cl: &cl}
		var measured []*side
		for _, fs := range sides(httpListener) {
			on := featuresFor(httpListener, fs.features)
			mutate, err := fe.withFeatures(ctx, on, httpListener, u)
			if err != nil {
				return nil, err
			}
			sc, err := e.upstreamServer(u, 0)
			if err != nil {
				return nil, err
			}
			cfg, err := e.writeConfigWith(map[string]serverConfig{"fx": sc}, mutate)
			if err != nil {
				return nil, err
			}
			var c client
			var p *proc
			if httpListener {
				tok, err := fe.token(on, httpListener)
				if err != nil {
					return nil, err
				}
				h, err := e.startHTTPProxyConfig(ctx, &cl, cfg, tok)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", fs.name, err)
				}
				c, p = h.c, h.proc
			} else {
				conn, err := dialStdio(ctx, e.fleet, e.proxySpec(cfg))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", fs.name, err)
				}
				cl = append(cl, conn.close)
				if _, err := waitTools(ctx, conn, hasTool("fx__echo")); err != nil {
					return nil, fmt.Errorf("%s: %w (%s)", fs.name, err, conn.proc.failure())
				}
				c, p = conn, conn.proc
			}
			s := echoSide(fs.name, c, p, "fx__echo", 0)
			if slices.Contains(on, featTracing) {
				s.extra = fe.sink
			}
			measured = append(measured, s)
		}
		return e.measure(ctx, measured, e.o.n, conc)
	}
}
