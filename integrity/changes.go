package integrity

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Record is one definition in a pin file.
type Record struct {
	Fingerprint string
	// Since is when it was recorded (pinned, or first seen as pending).
	Since time.Time
	// Definition is the canonical JSON of the fingerprinted members.
	Definition Definition
}

// Change is one tool whose current upstream definition awaits approval.
type Change struct {
	Server, Tool string
	// Reason is ReasonChanged (Pinned is set) or ReasonNew (Pinned is nil).
	Reason  Reason
	Pinned  *Record
	Pending Record
}

func recordOf(r *pinRecord) Record {
	return Record{Fingerprint: r.Fingerprint, Since: r.Since, Definition: Definition(r.Definition)}
}

// Pending lists the tools awaiting approval on server ("" means every
// server with a pin file), sorted by server and tool. It reads the pin
// files without locking them; a file that cannot be read is an error.
func (s *Store) Pending(server string) ([]Change, error) {
	servers := []string{server}
	if server == "" {
		var err error
		if servers, err = s.Servers(); err != nil {
			return nil, err
		}
	}
	var out []Change
	for _, name := range servers {
		pf, _, err := s.loadFull(name)
		if err != nil {
			return nil, err
		}
		out = append(out, pendingOf(name, pf)...)
	}
	return out, nil
}

func pendingOf(server string, pf *pinFile) []Change {
	if pf == nil {
		return nil
	}
	var out []Change
	for name, e := range pf.Tools {
		if e.Pending == nil {
			continue
		}
		c := Change{Server: server, Tool: name, Reason: e.Pending.Reason, Pending: recordOf(e.Pending)}
		if e.Pinned != nil {
			p := recordOf(e.Pinned)
			c.Pinned = &p
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out
}

// Approve pins the pending definitions of the named tools of server (all
// of its pending tools when tools is empty), under the pin file's lock,
// and returns what it approved. A named tool with nothing pending is an
// error matching ErrNothingPending, and nothing is written. A running
// proxy sees the new file within WatchInterval.
func (s *Store) Approve(server string, tools []string) ([]Change, error) {
	return s.approve(server, tools, "")
}

// ApproveFingerprint pins the pending definition of one tool of server
// only while it is the one reviewed: its fingerprint is fingerprint. A
// tool with nothing pending is ErrNothingPending, one whose pending
// definition has another fingerprint ErrPendingChanged; nothing is
// written then. The check and the write hold the pin file's lock.
func (s *Store) ApproveFingerprint(server, tool, fingerprint string) (Change, error) {
	approved, err := s.approve(server, []string{tool}, fingerprint)
	if err != nil {
		return Change{}, err
	}
	return approved[0], nil
}

// approve is Approve; with fingerprint set (and one tool), only that
// pending definition is approved.
func (s *Store) approve(server string, tools []string, fingerprint string) ([]Change, error) {
	var approved []Change
	_, _, err := s.update(server, func(cur *pinFile) (*pinFile, error) {
		approved = nil
		pending := pendingOf(server, cur)
		byName := map[string]Change{}
		for _, c := range pending {
			byName[c.Tool] = c
		}
		if len(tools) == 0 {
			approved = pending
		} else {
			var missing []string
			for _, t := range tools {
				c, ok := byName[t]
				if !ok {
					missing = append(missing, server+"/"+t)
					continue
				}
				if fingerprint != "" && c.Pending.Fingerprint != fingerprint {
					return nil, fmt.Errorf("%w: %s/%s is now %s, not %s", ErrPendingChanged, server, t,
						ShortFingerprint(c.Pending.Fingerprint), ShortFingerprint(fingerprint))
				}
				approved = append(approved, c)
			}
			if len(missing) > 0 {
				return nil, fmt.Errorf("%w: %s has no pending definition", ErrNothingPending, strings.Join(missing, ", "))
			}
		}
		if len(approved) == 0 {
			return nil, nil
		}
		next := cur.clone()
		now := time.Now().UTC().Truncate(time.Second)
		for _, c := range approved {
			e := next.Tools[c.Tool]
			next.Tools[c.Tool] = &pinEntry{Pinned: &pinRecord{Fingerprint: e.Pending.Fingerprint, Since: now,
				Definition: e.Pending.Definition}}
		}
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	return approved, nil
}

// Tools returns the names of every tool in server's pin file, pinned or
// pending, sorted (none when the file does not exist).
func (s *Store) Tools(server string) ([]string, error) {
	pf, _, err := s.load(server)
	if err != nil || pf == nil {
		return nil, err
	}
	out := make([]string, 0, len(pf.Tools))
	for name := range pf.Tools {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// Import copies into s the tools of server's pin file in src that s does
// not hold (pinned and pending records as they are), and returns how many
// it copied (with dryRun, would copy, writing nothing). A tool s holds
// already keeps s's records: they may be decisions made since. Running it
// again copies nothing.
func (s *Store) Import(src *Store, server string, dryRun bool) (int, error) {
	from, _, err := src.loadFull(server)
	if err != nil || from == nil {
		return 0, err
	}
	missing := func(cur *pinFile) []string {
		var out []string
		for name := range from.Tools {
			if cur == nil || cur.Tools[name] == nil {
				out = append(out, name)
			}
		}
		return out
	}
	if dryRun {
		cur, _, err := s.load(server)
		return len(missing(cur)), err
	}
	copied := 0
	_, _, err = s.update(server, func(cur *pinFile) (*pinFile, error) {
		names := missing(cur)
		copied = len(names)
		if copied == 0 {
			return nil, nil
		}
		next := &pinFile{Tools: map[string]*pinEntry{}}
		if cur != nil {
			next = cur.clone()
		}
		for _, name := range names {
			cp := *from.Tools[name]
			next.Tools[name] = &cp
		}
		return next, nil
	})
	return copied, err
}
