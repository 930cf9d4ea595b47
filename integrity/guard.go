package integrity

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/metrics"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// Options configure a Guard. The zero value of every field but StateDir is
// usable.
type Options struct {
	// StateDir is the config's state_dir: pin files live in
	// <StateDir>/pins. "" is allowed when no server pins (pinning: off
	// everywhere); a server that pins then gets ReasonStoreError.
	StateDir string
	// Logger receives one line per event (first pins, a changed or new
	// tool, scan findings, a release), each once per tool and fingerprint
	// while that fingerprint stays (one that comes back after another is
	// logged again).
	// The zero Logger discards everything.
	Logger zerolog.Logger
	// Metrics records mcp_proxy_tools_quarantined and
	// mcp_proxy_tool_findings_total; nil records nothing.
	Metrics *metrics.Metrics
	// Now is the clock of the times recorded in pin files; nil means
	// time.Now.
	Now func() time.Time
	// Shared, when it is a Redis store (Shared() true), keeps the pins in
	// it (NewSharedStore) instead of StateDir; nil or a memory store
	// leaves them in StateDir.
	Shared *store.Store
}

// Guard applies tool integrity (docs/security.md#tool-integrity) to catalog builds: it
// fingerprints each upstream tool, pins it on first sight, holds changed
// and (optionally) new tools, scans what clients would see, and keeps the
// pin files of its state directory up to date. All methods are safe for
// concurrent use. Reviews are serialized by one lock; a Review that must
// write a pin file waits for that file's lock (another process's approval
// holds it for milliseconds), at most 10 s.
type Guard struct {
	store   *Store
	log     zerolog.Logger
	metrics *metrics.Metrics
	now     func() time.Time

	mu      sync.Mutex
	servers map[string]*serverState
}

// serverState is what the Guard remembers of one server.
type serverState struct {
	// file is the last pin file read or written (nil: none on disk), id
	// its identity on disk, err why it could not be read.
	file   *pinFile
	id     fileID
	loaded bool
	err    error
	// tools caches fingerprints and scans by the bytes they came from.
	tools map[string]*toolCache
	// last is the input of the last Review, which Watch re-evaluates when
	// the pin file changes; held the tools it held, by name.
	last     *Server
	lastPeer *Peers
	lastRev  *Review
	held     map[string]string
	// logged holds the keys of the events the last Review met (logged
	// then or before): each is logged once per tool and fingerprint.
	// logging collects the keys the running Review meets; at its end it
	// replaces logged, so keys of tools gone or of fingerprints replaced
	// are dropped and the set stays the size of the current tools.
	logged, logging map[string]bool
	// storeErrs are the texts of the pin file errors logged, oldest
	// first, at most maxStoreErrors.
	storeErrs []string
}

// toolCache is the work done on one tool's bytes.
type toolCache struct {
	// upstream is the tool object as sent. Its canonical definition is
	// not kept (it would double what the guard holds per tool): a review
	// that writes a pin record takes the one cacheTools has just computed,
	// or computes it again (definitions, pin.go).
	upstream []byte
	fp       string
	// name is the name inside the definition: the key of the tool's pin.
	name    string
	visible []byte
	scan    scanResult
}

// Open returns a Guard over the pin files of opts.StateDir after checking
// that the pin files of servers (the enabled servers that pin, see
// PinningServers) can be read: a corrupt or unreadable one is an error
// naming the file (matching ErrCorruptPins), and the proxy must not start.
// A missing file is fine: that server is pinned on first sight.
func Open(opts Options, servers []string) (*Guard, error) {
	pins := NewStore(opts.StateDir)
	if opts.Shared != nil && opts.Shared.Shared() {
		var err error
		if pins, err = NewSharedStore(opts.Shared); err != nil {
			return nil, err
		}
	}
	g := &Guard{
		store:   pins,
		log:     opts.Logger,
		metrics: opts.Metrics,
		now:     opts.Now,
		servers: map[string]*serverState{},
	}
	if g.now == nil {
		g.now = time.Now
	}
	if len(servers) > 0 {
		// A shared store that does not answer yet does not stop the
		// start: its servers' tools are held until it answers.
		if err := g.store.Check(servers); err != nil && !errors.Is(err, store.ErrUnavailable) {
			return nil, err
		}
	}
	return g, nil
}

// Store returns the Guard's pin store.
func (g *Guard) Store() *Store { return g.store }

// Tool is one upstream tool as a catalog build has it.
type Tool struct {
	// Name is the upstream's own tool name.
	Name string
	// Upstream is the tool object exactly as the upstream sent it
	// (upstream.Tool.Raw); the fingerprint is computed from it. Never
	// modified; it must not change after the call.
	Upstream json.RawMessage
	// Visible is the tool object as clients would see it: after the
	// server's tools.overrides (docs/agents.md#overrides-and-rate-limits), before the proxy's own TAG
	// stripping (docs/protocol.md#fidelity), with or without the exposed name (names are
	// not scanned). nil means Upstream. The scan reads it, so an override's
	// description can release a tool the scan held.
	Visible json.RawMessage
}

// Server is one server's input to Review.
type Server struct {
	// Name is the configured server name.
	Name string
	// Policy is the server's pinning, new_tools and scan (PolicyOf).
	Policy Policy
	// Tools are the server's discovered tools (a connected snapshot's).
	Tools []Tool
}

// Review decides, for every tool of one server, whether it is listed or
// held, and what clients see of it. peers is the catalog's tool index for
// the cross-server detector (nil: none). It reads the server's pin file
// (only when the file changed on disk since the last read) and writes it
// when something is to be recorded: first sight, a new pin, a changed or
// new tool awaiting approval, a tool back to its pin. Work on unchanged
// bytes is cached, so a rebuild that changes nothing costs map lookups.
// Review never fails: a pin file that cannot be read is logged and
// reported in Review.Err. The guard keeps in, its Tools included, for
// Watch: the caller must not modify them afterwards.
func (g *Guard) Review(in Server, peers *Peers) *Review {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.review(in, peers)
}

func (g *Guard) review(in Server, peers *Peers) *Review {
	st := g.state(in.Name)
	st.logging = make(map[string]bool, len(st.logged))
	defer func() { st.logged, st.logging = st.logging, nil }()
	pol := in.Policy.normalized()
	// The pin file is read first: cacheTools keeps no definition of a
	// tool that matches its pin.
	var storeErr error
	if pol.Pinning != PinOff {
		storeErr = g.refresh(st, in.Name)
	}
	caches, fresh := g.cacheTools(st, in.Tools)

	rev := &Review{Server: in.Name, Verdicts: make([]Verdict, len(in.Tools))}
	var pins []pinState
	if pol.Pinning != PinOff {
		if rev.Err = storeErr; rev.Err == nil {
			pins, rev.Err = g.pin(st, in.Name, pol, caches, fresh)
		}
	}
	for i, t := range in.Tools {
		tc := caches[i]
		v := &rev.Verdicts[i]
		*v = Verdict{Server: in.Name, Name: t.Name, Fingerprint: tc.fp, Visible: tc.visible}
		if pins != nil {
			v.Changed = pins[i].changed
			if pins[i].held != "" {
				v.Reasons = append(v.Reasons, pins[i].held)
			}
		}
		v.Findings = append(append([]Finding(nil), tc.scan.findings...), peers.references(in.Name, tc.scan.words)...)
		if pol.Scan == ScanStrip && tc.scan.stripped != nil {
			v.Visible = tc.scan.stripped
			markStripped(v.Findings, tc.scan.strippedFindings)
		}
		if pol.Scan == ScanQuarantine && hasLevel(v.Findings, LevelQuarantine) {
			v.Reasons = append(v.Reasons, ReasonScan)
		}
		if rev.Err != nil && pol.Pinning == PinQuarantine {
			v.Reasons = append(v.Reasons, ReasonStoreError)
		}
		v.Held = len(v.Reasons) > 0
		g.report(st, in.Name, pol, v, pins, i)
	}
	g.reportFirstSight(in.Name, pins)
	g.metrics.ToolsQuarantined(in.Name, rev.Held())
	g.remember(st, in, peers, rev)
	return rev
}

// pinned is the fingerprint pinned for the tool named name in the pin file
// last read, "" when there is none.
func (st *serverState) pinned(name string) string {
	if st.file == nil {
		return ""
	}
	if e := st.file.Tools[name]; e != nil && e.Pinned != nil {
		return e.Pinned.Fingerprint
	}
	return ""
}

// state returns server's state, creating it.
func (g *Guard) state(server string) *serverState {
	st := g.servers[server]
	if st == nil {
		st = &serverState{tools: map[string]*toolCache{}, logged: map[string]bool{}, held: map[string]string{}}
		g.servers[server] = st
	}
	return st
}

// cacheTools fingerprints and scans the tools whose bytes changed, and
// forgets tools that are gone. fresh holds the canonical definitions it
// computed, for the pin records of this review only; it has none for a
// tool whose fingerprint is the one pinned (the pin needs no new record),
// and pin records compute a missing one again (definitions.record).
func (g *Guard) cacheTools(st *serverState, tools []Tool) (out []*toolCache, fresh [][]byte) {
	out = make([]*toolCache, len(tools))
	fresh = make([][]byte, len(tools))
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		seen[t.Name] = true
		visible := t.Visible
		if visible == nil {
			visible = t.Upstream
		}
		tc := st.tools[t.Name]
		if tc == nil {
			tc = &toolCache{}
			st.tools[t.Name] = tc
		}
		if tc.upstream == nil || !bytes.Equal(tc.upstream, t.Upstream) {
			tc.upstream = t.Upstream
			fresh[i], tc.fp, tc.name = fingerprintTool(t.Name, t.Upstream, st.pinned(t.Name))
		}
		if tc.visible == nil || !bytes.Equal(tc.visible, visible) {
			tc.visible = visible
			tc.scan = scanObject(visible)
		}
		out[i] = tc
	}
	for name := range st.tools {
		if !seen[name] {
			delete(st.tools, name)
		}
	}
	return out, fresh
}

// markStripped sets Stripped on the findings that are gone from the
// stripped object.
func markStripped(findings, remaining []Finding) {
	left := map[string]bool{}
	for _, f := range remaining {
		left[f.Rule+"\x00"+f.Where] = true
	}
	for i := range findings {
		if findings[i].Kind != KindCrossServer && !left[findings[i].Rule+"\x00"+findings[i].Where] {
			findings[i].Stripped = true
		}
	}
}

func hasLevel(findings []Finding, level Level) bool {
	for _, f := range findings {
		if f.Level == level {
			return true
		}
	}
	return false
}

// remember keeps the input (not a copy: see Review) and the held set for
// Watch.
func (g *Guard) remember(st *serverState, in Server, peers *Peers, rev *Review) {
	st.last, st.lastPeer, st.lastRev = &in, peers, rev
	st.held = heldSet(rev)
}

// Last returns the result of the latest Review of server (by a catalog
// build or by Watch), nil when there was none: the verdicts, findings
// included, that the proxy serves now. It reads no file and records
// nothing. The Review must not be modified.
func (g *Guard) Last(server string) *Review {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.servers[server]; st != nil {
		return st.lastRev
	}
	return nil
}

// heldSet maps each held tool to its reasons.
func heldSet(rev *Review) map[string]string {
	out := map[string]string{}
	for _, v := range rev.Verdicts {
		if v.Held {
			rs := make([]string, len(v.Reasons))
			for i, r := range v.Reasons {
				rs[i] = string(r)
			}
			out[v.Name] = strings.Join(rs, ",")
		}
	}
	return out
}

// sameHeld compares two held sets.
func sameHeld(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// sortedServers returns the names of the servers with a remembered input.
func (g *Guard) sortedServers() []string {
	var out []string
	for name, st := range g.servers {
		if st.last != nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// fingerprintTool canonicalizes one upstream tool object; recorded is as
// for canonicalize. A tool that is not an object, or whose "name" is not
// name, gets an empty fingerprint: it is never pinned, and pinning:
// quarantine holds it.
func fingerprintTool(name string, raw []byte, recorded string) (Definition, string, string) {
	def, fp, got, err := canonicalize(raw, recorded)
	if err != nil || got != name || name == "" {
		return nil, "", ""
	}
	return def, fp, name
}
