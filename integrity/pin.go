package integrity

import (
	"encoding/json"
	"slices"
	"time"
)

// pinState is the pinning outcome for one tool of a Review.
type pinState struct {
	changed bool
	// held is ReasonChanged or ReasonNew when pinning holds the tool, ""
	// otherwise.
	held Reason
	// event is what happened to the pin file for this tool: "" (nothing),
	// "first" (pinned with its server's first sight), "pinned" (a new tool
	// pinned under new_tools: allow), "returned" (back to its pin).
	event string
}

// pin compares the tools with the server's pin file, which refresh has
// just read without an error, and records what is to be recorded. It
// returns one state per tool, and the error that made writing the pin file
// fail (then the states are nil).
func (g *Guard) pin(st *serverState, server string, pol Policy, tools []*toolCache, fresh [][]byte) ([]pinState, error) {
	defs := &definitions{tools: tools, defs: fresh}
	states, next := reconcile(st.file, defs, pol, g.now())
	if next == nil {
		return states, nil
	}
	// Something is to be written: do it again on the file as it is now,
	// under its lock, so an approval made meanwhile is not lost.
	var out []pinState
	pf, id, err := g.store.update(server, func(cur *pinFile) (*pinFile, error) {
		var n *pinFile
		out, n = reconcile(cur, defs, pol, g.now())
		return n, nil
	})
	if err != nil {
		g.storeFailed(st, server, err)
		return nil, err
	}
	st.file, st.id, st.loaded, st.err = pf, id, true, nil
	return out, nil
}

// refresh reads server's pin file again when it changed on disk since the
// last read or write.
func (g *Guard) refresh(st *serverState, server string) error {
	if !g.store.enabled() {
		return ErrNoStateDir
	}
	id, err := g.store.stat(server)
	if err == nil && st.loaded && id == st.id {
		return st.err
	}
	statErr := err
	pf, loadedID, err := g.store.load(server)
	if err != nil {
		g.storeFailed(st, server, err)
		// Remember the broken file's identity: it is read again only once
		// it changes (repaired or replaced).
		st.file, st.id, st.loaded, st.err = nil, id, statErr == nil, err
		return err
	}
	st.file, st.id, st.loaded, st.err = pf, loadedID, true, nil
	return nil
}

// maxStoreErrors is how many distinct pin file error texts a server
// remembers so that each is logged once. The real causes (unreadable,
// corrupt, locked, disk full) are a handful; a file rewritten with ever
// different garbage would otherwise grow the set forever, and past the cap
// only the oldest text is forgotten (and logged again should it return).
const maxStoreErrors = 8

// storeFailed logs a pin file problem once per distinct text among the
// last maxStoreErrors.
func (g *Guard) storeFailed(st *serverState, server string, err error) {
	text := err.Error()
	if slices.Contains(st.storeErrs, text) {
		return
	}
	if len(st.storeErrs) == maxStoreErrors {
		st.storeErrs = slices.Delete(st.storeErrs, 0, 1)
	}
	st.storeErrs = append(st.storeErrs, text)
	g.log.Error().Str("server", server).Err(err).Msg("tool pins cannot be used: with pinning: quarantine every tool of the server is held until the pin file is repaired")
}

// reconcile compares tools with pin file f (nil: the server was never
// seen) under pol. It returns the state of each tool and, when the file
// must change, the new file (f itself is never modified); nil when
// nothing is to be written.
//
//   - First sight (no file) pins every tool.
//   - A tool whose fingerprint equals its pin is fine; a pending record
//     it had is dropped (it returned to its pin).
//   - A pinned tool with another fingerprint is changed: its current
//     definition is recorded as pending (reason changed) and it is held
//     under pinning: quarantine.
//   - A tool without a pin is new: pinned under new_tools: allow, else
//     recorded as pending (reason new) and held.
//   - Pending records of tools the server no longer lists are dropped.
//
// A tool whose object could not be fingerprinted is held under pinning:
// quarantine (as changed) and recorded nowhere.
func reconcile(f *pinFile, defs *definitions, pol Policy, now time.Time) ([]pinState, *pinFile) {
	tools := defs.tools
	states := make([]pinState, len(tools))
	if f == nil && len(tools) == 0 {
		return states, nil
	}
	var next *pinFile
	edit := func() *pinFile {
		if next == nil {
			if f == nil {
				next = &pinFile{Version: pinFileVersion, Tools: map[string]*pinEntry{}}
			} else {
				next = f.clone()
			}
		}
		return next
	}
	first := f == nil
	names := make(map[string]bool, len(tools))
	for i, tc := range tools {
		name := toolName(tc)
		if tc.fp == "" || name == "" {
			states[i] = pinState{changed: true, held: holdIf(pol.Pinning == PinQuarantine, ReasonChanged)}
			continue
		}
		names[name] = true
		var e *pinEntry
		if f != nil {
			e = f.Tools[name]
		}
		switch {
		case first:
			edit().Tools[name] = &pinEntry{Pinned: defs.record(i, "", now)}
			states[i].event = "first"
		case e != nil && e.Pinned != nil && e.Pinned.Fingerprint == tc.fp:
			if e.Pending != nil {
				cp := *e
				cp.Pending = nil
				edit().Tools[name] = &cp
				states[i].event = "returned"
			}
		case e != nil && e.Pinned != nil:
			states[i] = pinState{changed: true, held: holdIf(pol.Pinning == PinQuarantine, ReasonChanged)}
			if e.Pending == nil || e.Pending.Fingerprint != tc.fp {
				cp := *e
				cp.Pending = defs.record(i, ReasonChanged, now)
				edit().Tools[name] = &cp
			}
		case pol.NewTools == NewAllow:
			edit().Tools[name] = &pinEntry{Pinned: defs.record(i, "", now)}
			states[i].event = "pinned"
		default:
			states[i].held = ReasonNew
			if e == nil || e.Pending == nil || e.Pending.Fingerprint != tc.fp {
				edit().Tools[name] = &pinEntry{Pending: defs.record(i, ReasonNew, now)}
			}
		}
	}
	if f != nil {
		for name, e := range f.Tools {
			if names[name] || e.Pending == nil {
				continue
			}
			if e.Pinned == nil {
				delete(edit().Tools, name)
				continue
			}
			cp := *e
			cp.Pending = nil
			edit().Tools[name] = &cp
		}
	}
	return states, next
}

func holdIf(cond bool, r Reason) Reason {
	if cond {
		return r
	}
	return ""
}

// definitions gives one review's tools their canonical definitions for
// pin records, each made at most once: reconcile runs twice when it
// writes (on the file as read, then under the lock), and on first sight
// every tool is recorded. defs starts as the definitions cacheTools has
// just computed (nil where it computed none); the guard keeps none between
// reviews (it would double what it holds per tool).
type definitions struct {
	tools []*toolCache
	defs  [][]byte
}

// record is the pin record of tool i.
func (d *definitions) record(i int, reason Reason, now time.Time) *pinRecord {
	if d.defs[i] == nil {
		d.defs[i], _, _ = fingerprintTool(d.tools[i].name, d.tools[i].upstream, "")
	}
	return &pinRecord{Fingerprint: d.tools[i].fp, Since: now.UTC().Truncate(time.Second), Reason: reason, Definition: json.RawMessage(d.defs[i])}
}

// toolName is the name inside a tool's canonical definition ("" when it
// has none).
func toolName(tc *toolCache) string {
	if tc.fp == "" {
		return ""
	}
	return tc.name
}
