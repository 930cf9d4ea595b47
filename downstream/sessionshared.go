package downstream

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
	"github.com/mcp-proxy/mcp-proxy/store"
)

// Fields of a session's hash in a Redis store (docs/shared-state.md). Who
// the session serves is written once, when it starts; the rest as it
// changes. Tool names and group indexes follow their prefix.
const (
	fieldAgent       = "a"
	fieldSubject     = "ps"
	fieldToken       = "pt"
	fieldPerCall     = "pc" // JSON list; absent: no per-call list
	fieldVersion     = "v"
	fieldCaps        = "c" // the letters of clientCaps (capsLetters)
	fieldLevel       = "l"
	fieldInitialized = "i"
	prefixActivated  = "t:"
	prefixGroup      = "g:"
	prefixAlways     = "w:"
)

// sharedState is the state of an HTTP session kept in a Redis store, so
// that any replica serves it. It reads from a copy loaded at the start of
// each request (sessionTable.acquire: from the replica's copy of the
// session when it is current, else one round trip) and writes each change
// through to the store at once. A write the store does not take is
// logged and kept in the copy: the request that made it was served, and the
// next request, on whichever replica, fails with the store's error if the
// store is still away. The parked call of a stateless request stays in
// this process. Its methods are safe for concurrent use.
//
// When the fields came from the replica's copy, a write just made on
// another replica may not be in them yet (its announcement is on its
// way): its methods answer from the fields as they are, and a caller
// about to answer NO from them (a tool not activated, a group not
// active, nothing activated, no "always" approval, not initialized)
// reads the session from Redis first (reread), so that such a write is
// never refused, and fails with the store's error when that read does. A
// YES cannot come from a write missed (a session's fields are only ever
// added), and a log level set elsewhere may be read late
// (docs/shared-state.md).
type sharedState struct {
	id       string
	sessions *store.Sessions
	log      zerolog.Logger

	mu          sync.Mutex
	client      *clientInfo
	level       int32
	initialized bool
	fromCopy    bool          // the fields came from the replica's copy, not read since
	always      toolSet       // under its own lock
	deferred    deferredState // under its own lock

	parked atomic.Pointer[parkedCall]

	// levelPending is closed once the re-level a request of the session
	// started on this replica (a level set elsewhere) has reached the
	// upstreams; nil when none is under way. Under the session table's
	// lock, not mu: the other requests of the session wait on it.
	levelPending chan struct{}

	// beforeReread, when set (tests; under mu), runs as a reread is about
	// to read the session from Redis.
	beforeReread func()
}

func newSharedState(id string, sessions *store.Sessions, log zerolog.Logger) *sharedState {
	return &sharedState{id: id, sessions: sessions, log: log, level: -1}
}

// load replaces the copy with the session read (from the replica's copy
// or from Redis), and reports whether the log level changed (another
// replica set it).
func (s *sharedState) load(got store.Session) (levelChanged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.level
	s.fill(got.Fields)
	s.fromCopy = got.Copy
	return s.level != before
}

// fill sets the state from fields. s.mu must be held.
func (s *sharedState) fill(fields map[string]string) {
	s.client, s.level, s.initialized = nil, -1, fields[fieldInitialized] == "1"
	activated, groups, always := map[string]bool{}, map[int]bool{}, map[string]bool{}
	if v, ok := fields[fieldVersion]; ok {
		s.client = &clientInfo{version: v, caps: capsOfLetters(fields[fieldCaps])}
	}
	if l, err := strconv.ParseInt(fields[fieldLevel], 10, 32); err == nil {
		s.level = int32(l)
	}
	for k := range fields {
		switch {
		case strings.HasPrefix(k, prefixActivated):
			activated[k[len(prefixActivated):]] = true
		case strings.HasPrefix(k, prefixAlways):
			always[k[len(prefixAlways):]] = true
		case strings.HasPrefix(k, prefixGroup):
			if g, err := strconv.Atoi(k[len(prefixGroup):]); err == nil {
				groups[g] = true
			}
		}
	}
	s.deferred.reset(activated, groups)
	s.always.reset(always)
}

// reread reads the session from Redis when its fields came from the
// replica's copy, so that a NO the state is about to answer is not one a
// write made elsewhere, and not announced here yet, would turn into a
// YES. It returns the store's error: the NO is not to be answered then.
// The fields count as read only once the read is in: a request asking
// while another one's read is on its way reads too, rather than answer
// from the copy. The log level stays as it was: the next request's read
// tells the upstreams of a change (sessionTable.acquire). A session gone
// leaves the state as it was (the next request finds it gone).
func (s *sharedState) reread(ctx context.Context) error {
	s.mu.Lock()
	fromCopy, hook := s.fromCopy, s.beforeReread
	s.mu.Unlock()
	if !fromCopy {
		return nil
	}
	if hook != nil {
		hook()
	}
	got, err := s.sessions.Reload(ctx, s.id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fromCopy = false
	if got.Found() {
		level := s.level
		s.fill(got.Fields)
		s.level = level
	}
	return nil
}

// write sends fields to the store (see sharedState on failures).
func (s *sharedState) write(pairs ...string) {
	if err := s.sessions.Set(context.Background(), s.id, pairs...); err != nil {
		s.log.Warn().Str("error", sanitize.Error(err.Error())).Msg("a session's state change was not stored; other replicas do not see it")
	}
}

func (s *sharedState) Client() *clientInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

func (s *sharedState) SetClient(c clientInfo) bool {
	s.mu.Lock()
	first := s.client == nil
	s.client = &c
	s.mu.Unlock()
	s.write(fieldVersion, c.version, fieldCaps, capsLetters(c.caps))
	return first
}

func (s *sharedState) Level() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.level
}

func (s *sharedState) SetLevel(level int32) {
	s.mu.Lock()
	s.level = level
	s.mu.Unlock()
	s.write(fieldLevel, strconv.Itoa(int(level)))
}

func (s *sharedState) Activated(tool string) bool { return s.deferred.isActivated(tool) }

func (s *sharedState) GroupActive(i int) bool { return s.deferred.groupActive(i) }

func (s *sharedState) Activate(tools []string, groups []int) bool {
	newTools, newGroups := s.deferred.activate(tools, groups)
	var pairs []string
	for _, t := range newTools {
		pairs = append(pairs, prefixActivated+t, "1")
	}
	for _, g := range newGroups {
		pairs = append(pairs, prefixGroup+strconv.Itoa(g), "1")
	}
	s.write(pairs...)
	return len(pairs) > 0
}

func (s *sharedState) NothingActivated() bool { return s.deferred.empty() }

func (s *sharedState) ApprovedAlways(tool string) bool { return s.always.has(tool) }

func (s *sharedState) ApproveAlways(tool string) {
	s.always.add(tool)
	s.write(prefixAlways+tool, "1")
}

func (s *sharedState) Parked() *parkedCall { return s.parked.Load() }

func (s *sharedState) Park(pc *parkedCall) { s.parked.Store(pc) }

// recordInitialized stores that the client sent notifications/initialized,
// so that another replica asks it questions without waiting for one.
func (s *sharedState) recordInitialized() {
	s.mu.Lock()
	done := s.initialized
	s.initialized = true
	s.mu.Unlock()
	if !done {
		s.write(fieldInitialized, "1")
	}
}

// wasInitialized reports whether the stored session had been initialized,
// as far as the fields last loaded tell.
func (s *sharedState) wasInitialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized
}

// initializedNow is wasInitialized that, on a NO from the replica's copy,
// reads the session again first (reread). A NO only holds back the
// questions waiting for the client's notifications/initialized, so a
// store that does not answer that read leaves them for the next request
// rather than failing this one.
func (s *sharedState) initializedNow(ctx context.Context) bool {
	return s.wasInitialized() || s.reread(ctx) == nil && s.wasInitialized()
}

// capsLetters encodes client capabilities in a few letters.
func capsLetters(c clientCaps) string {
	var b []byte
	for _, f := range []struct {
		on bool
		l  byte
	}{{c.sampling, 's'}, {c.elicitation, 'e'}, {c.elicitationURL, 'u'}, {c.roots, 'r'}} {
		if f.on {
			b = append(b, f.l)
		}
	}
	return string(b)
}

func capsOfLetters(s string) clientCaps {
	return clientCaps{sampling: strings.IndexByte(s, 's') >= 0, elicitation: strings.IndexByte(s, 'e') >= 0,
		elicitationURL: strings.IndexByte(s, 'u') >= 0, roots: strings.IndexByte(s, 'r') >= 0}
}

// sessionFields are the fields a new shared session starts with: whom it
// serves.
func sessionFields(s *session) map[string]string {
	f := map[string]string{fieldAgent: s.agent.Name, fieldSubject: s.principal.subject, fieldToken: strconv.Itoa(s.principal.token)}
	if s.perCall != nil {
		b, _ := json.Marshal(s.perCall) // strings: never fails
		f[fieldPerCall] = string(b)
	}
	return f
}

// servesClient reports whether a stored session belongs to client c (its
// agent's endpoint and its user), as sessionTable.find does for local ones.
func servesClient(fields map[string]string, c client) bool {
	return fields[fieldAgent] == c.agent && fields[fieldSubject] == c.principal.subject &&
		fields[fieldToken] == strconv.Itoa(c.principal.token)
}

// perCallOf reads the per-call list of stored fields; nil when none.
func perCallOf(fields map[string]string) []string {
	raw, ok := fields[fieldPerCall]
	if !ok {
		return nil
	}
	var list []string
	if json.Unmarshal([]byte(raw), &list) != nil || list == nil {
		return []string{}
	}
	return list
}
