package main

import (
	"fmt"
)

// The sides of a scenario: ways to the same upstream, measured in the same
// rounds.
const (
	// sideDirect talks to the upstream itself (over HTTP: the upstream's
	// own Streamable HTTP mode).
	sideDirect = "direct"
	// sideFloor has the thinnest stand-in in the proxy's place (floor.go).
	sideFloor = "floor"
	// sideProxy has mcp-proxy in between.
	sideProxy = "proxy"
	// sidePeer has another MCP proxy in between (-peer, peer.go).
	sidePeer = "peer"
)

// target is a scenario's performance goal (from the issues). The zero
// target means none: the ratios are reported without a verdict.
type target struct {
	// measure is what is judged: "p50" (proxy/base p50 latency),
	// "throughput" (proxy/base req/s), "added" ((proxy p50 − base p50) /
	// base p50) or "rss" (the proxy's peak RSS in MiB).
	measure string
	// base is the side the proxy is compared with: sideDirect, sideFloor
	// or (the store scenarios) sideMemory.
	base  string
	limit float64
	// atMost: the value must be <= limit; below: < limit; else >= limit.
	atMost, below bool
	// upstream, when set, is the only upstream whose row is judged (the
	// targets of issue 14 are set with the go-sdk upstream); rows of the
	// others show the same ratio without a verdict.
	upstream string
	// side is the side judged against base; "" means sideProxy.
	side string
}

// judged is the side the target judges.
func (t target) judged() string {
	if t.side == "" {
		return sideProxy
	}
	return t.side
}

func (t target) String() string {
	switch t.measure {
	case "p50":
		return fmt.Sprintf("p50 ≤ %g× %s", t.limit, t.base)
	case "throughput":
		return fmt.Sprintf("thr ≥ %g× %s", t.limit, t.base)
	case "added":
		return fmt.Sprintf("added ≤ %g× %s", t.limit, t.base)
	case "rss":
		return fmt.Sprintf("RSS < %g MB", t.limit)
	}
	return "-"
}

// result is one row: a scenario with one upstream.
type result struct {
	Scenario string `json:"scenario"`
	Upstream string `json:"upstream"`
	// Sides holds the summary of every side measured, by side name.
	Sides map[string]summary `json:"sides,omitempty"`
	// Ratios compares sides, keyed "a/b" (proxy/floor, proxy/direct, ...).
	Ratios map[string]ratios `json:"ratios,omitempty"`
	Target string            `json:"target"`
	// Value is the judged number (see target.measure). It is the one signed
	// number: noise can make an added time negative.
	Value float64 `json:"value"`
	// Verdict is "pass", "miss", "none" (no target, or a target judged on
	// another upstream) or "error".
	Verdict string `json:"verdict"`
	Error   string `json:"error,omitempty"`
	// Store is what the store scenarios learn of the Redis store.
	Store *storeFigures `json:"store,omitempty"`

	target target
}

// ratios is side a over side b. CPU is left out (zero) where either side
// has no CPU figure or b's is zero.
type ratios struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Thr float64 `json:"throughput,omitempty"`
	CPU float64 `json:"cpu_per_call,omitempty"`
}

// ratioPairs are the comparisons a result carries, where both sides exist.
var ratioPairs = [][2]string{
	{sideProxy, sideFloor}, {sideProxy, sideDirect}, {sideFloor, sideDirect},
	{sidePeer, sideFloor}, {sidePeer, sideDirect}, {sidePeer, sideProxy},
	{sideProxy, sideMemory},
}

// newResult fills the ratios of the sides' summaries.
func newResult(sides map[string]summary) *result {
	r := &result{Sides: sides, Ratios: map[string]ratios{}}
	for _, p := range ratioPairs {
		a, okA := sides[p[0]]
		b, okB := sides[p[1]]
		if !okA || !okB || b.P50ms <= 0 || b.P99ms <= 0 {
			continue
		}
		r.Ratios[p[0]+"/"+p[1]] = sideRatio(a, b)
	}
	// The feature scenarios compare every proxy with the bare one.
	if _, ok := sides[sideBare]; ok {
		for name := range sides {
			if name != sideBare && sides[sideBare].P50ms > 0 && sides[sideBare].P99ms > 0 {
				r.Ratios[name+"/"+sideBare] = sideRatio(sides[name], sides[sideBare])
			}
		}
	}
	return r
}

// sideRatio is a over b; b's p50 and p99 must be positive.
func sideRatio(a, b summary) ratios {
	q := ratios{P50: a.P50ms / b.P50ms, P99: a.P99ms / b.P99ms}
	if b.RPS > 0 {
		q.Thr = a.RPS / b.RPS
	}
	if a.CPUus != nil && b.CPUus != nil && *b.CPUus > 0 {
		q.CPU = *a.CPUus / *b.CPUus
	}
	return q
}

// judge sets Target, Value and Verdict.
func (r *result) judge(t target) {
	r.target = t
	r.Target = t.String()
	if r.Error != "" {
		r.Verdict = "error"
		return
	}
	q := r.Ratios[t.judged()+"/"+t.base]
	switch t.measure {
	case "p50":
		r.Value = q.P50
	case "throughput":
		r.Value = q.Thr
	case "added":
		r.Value = q.P50 - 1
	case "rss":
		r.Value = r.Sides[sideProxy].PeakRSSMB
	default:
		r.Verdict = "none"
		return
	}
	if t.upstream != "" && t.upstream != r.Upstream {
		r.Target = "- (" + t.String() + " with " + t.upstream + ")"
		r.Verdict = "none"
		return
	}
	pass := r.Value >= t.limit
	switch {
	case t.below:
		pass = r.Value < t.limit
	case t.atMost:
		pass = r.Value <= t.limit
	}
	r.Verdict = map[bool]string{true: "pass", false: "miss"}[pass]
}
