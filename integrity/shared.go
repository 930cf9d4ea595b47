package integrity

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/store"
)

// Key kinds and fields in the shared store.
const (
	kindPins       = "pins"
	kindPinServers = "pin-servers"
	kindPinsNudge  = "pins-changed"
	fieldDoc       = "doc"
	fieldRev       = "rev"
)

// maxSharedWrites bounds the attempts of one update against concurrent
// writers of the same server's pins: each attempt loses only to a write
// that succeeded, and replicas write a server's pins on first sight and on
// changes, so more than a few losses in a row means something is wrong.
const maxSharedWrites = 8

// sharedPins keeps pin documents in a Redis store: one hash per server
// ("<prefix>pins:<server>") holding the document as a pin file holds it
// and a revision raised by every write, a set of the servers that have
// one, and a channel on which every write names its server, so that other
// replicas re-read it at once (Guard.Watch). Pins hold tool definitions,
// not secrets: they are stored as they are, not sealed.
type sharedPins struct {
	r *store.Redis
}

// NewSharedStore returns the pin store kept in st, a Redis store
// (st.Shared()): every replica and CLI with the same store config sees
// the same pins and decisions.
func NewSharedStore(st *store.Store) (*Store, error) {
	if !st.Shared() {
		return nil, errors.New("integrity: the shared-state store is not shared (type memory)")
	}
	return &Store{shared: &sharedPins{r: st.Redis()}, lockWait: lockWait}, nil
}

func (p *sharedPins) key(server string) string { return p.r.Key(kindPins, server) }

// channel is the channel writes are announced on.
func (p *sharedPins) channel() string { return p.r.Key(kindPinsNudge) }

// stat is the revision of server's document (zero fileID: none).
func (p *sharedPins) stat(server string) (fileID, error) {
	var rev string
	err := p.r.Run(context.Background(), "pins_stat", func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		rev, err = c.HGet(ctx, p.key(server), fieldRev).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return fileID{}, nil
	}
	if err != nil {
		return fileID{}, fmt.Errorf("integrity: pins of %s: %w", server, err)
	}
	return revID(rev)
}

func revID(rev string) (fileID, error) {
	if rev == "" {
		return fileID{}, nil
	}
	n, err := strconv.ParseInt(rev, 10, 64)
	if err != nil {
		return fileID{}, fmt.Errorf("integrity: revision %q is not a number", rev)
	}
	return fileID{exists: true, rev: n}, nil
}

// servers is every server with a document, sorted.
func (p *sharedPins) servers() ([]string, error) {
	var out []string
	err := p.r.Run(context.Background(), "pins_servers", func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		out, err = c.SMembers(ctx, p.r.Key(kindPinServers)).Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("integrity: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// get returns server's document and its identity (nil, zero: none).
func (p *sharedPins) get(server string) ([]byte, fileID, error) {
	var vals []any
	err := p.r.Run(context.Background(), "pins_load", func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		vals, err = c.HMGet(ctx, p.key(server), fieldDoc, fieldRev).Result()
		return err
	})
	if err != nil {
		return nil, fileID{}, fmt.Errorf("integrity: pins of %s: %w", server, err)
	}
	doc, _ := vals[0].(string)
	rev, _ := vals[1].(string)
	if doc == "" {
		return nil, fileID{}, nil
	}
	id, err := revID(rev)
	return []byte(doc), id, err
}

// casScript writes a server's document (ARGV[2]) only if its revision is
// still ARGV[1] ("" for none), adds the server to the set KEYS[2] and
// announces the write on channel ARGV[3]; it returns the new revision, or
// false when another writer came first.
var casScript = redis.NewScript(`
local rev = redis.call("HGET", KEYS[1], "rev") or ""
if rev ~= ARGV[1] then return false end
redis.call("HSET", KEYS[1], "doc", ARGV[2])
local n = redis.call("HINCRBY", KEYS[1], "rev", 1)
redis.call("SADD", KEYS[2], ARGV[4])
redis.call("PUBLISH", ARGV[3], ARGV[4])
return n
`)

// put writes doc as server's document if it is still at revision id, and
// returns the new identity; ok is false when another writer came first.
func (p *sharedPins) put(server string, id fileID, doc []byte) (fileID, bool, error) {
	want := ""
	if id.exists {
		want = strconv.FormatInt(id.rev, 10)
	}
	var n int64
	err := p.r.Run(context.Background(), "pins_write", func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		n, err = casScript.Run(ctx, c, []string{p.key(server), p.r.Key(kindPinServers)}, want, doc, p.channel(), server).Int64()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return fileID{}, false, nil
	}
	if err != nil {
		return fileID{}, false, fmt.Errorf("integrity: write pins of %s: %w", server, err)
	}
	return fileID{exists: true, rev: n}, true, nil
}

// readShared is read for the shared store: the revision first, then the
// document only when it is not the one cached (or full).
func (s *Store) readShared(server string, full bool) (*pinFile, fileID, error) {
	if !full {
		id, err := s.shared.stat(server)
		if err != nil {
			return nil, fileID{}, err
		}
		if !id.exists {
			return nil, fileID{}, nil
		}
		if sum, ok := s.cached(server, id); ok {
			return sum, id, nil
		}
	}
	data, id, err := s.shared.get(server)
	if err != nil || data == nil {
		return nil, fileID{}, err
	}
	pf, err := parsePinFile(data, server, full)
	if err != nil {
		return nil, fileID{}, corrupt(s.Path(server), err)
	}
	if full {
		return pf, id, nil
	}
	return s.keepSummary(server, id, pf)
}

// updateShared is update for the shared store: instead of a lock, each
// attempt writes only if no other writer came between its read and its
// write (a compare-and-set on the revision), and reads and runs fn again
// if one did.
func (s *Store) updateShared(server string, fn func(cur *pinFile) (*pinFile, error)) (*pinFile, fileID, error) {
	for range maxSharedWrites {
		cur, next, id, err := s.loadApply(server, fn)
		if err != nil {
			return nil, fileID{}, err
		}
		if next == nil {
			return s.keepSummary(server, id, cur)
		}
		next.Version, next.Server = pinFileVersion, server
		data, err := encodePinFile(next)
		if err != nil {
			return nil, fileID{}, fmt.Errorf("integrity: encode pins of %s: %w", server, err)
		}
		newID, ok, err := s.shared.put(server, id, data)
		if err != nil {
			return nil, fileID{}, err
		}
		if ok {
			return s.keepSummary(server, newID, next)
		}
	}
	return nil, fileID{}, fmt.Errorf("%w: %s (other writers came first %d times)", ErrLocked, s.Path(server), maxSharedWrites)
}

// subscribe returns the announcements of writes to the shared store's
// pins, and a function that stops them. go-redis's subscription dials
// again by itself after a drop; what is announced meanwhile is lost, which
// Watch's periodic look makes up for.
func (p *sharedPins) subscribe(ctx context.Context) (<-chan *redis.Message, func()) {
	ps := p.r.Client().Subscribe(ctx, p.channel())
	return ps.Channel(), func() { _ = ps.Close() }
}
