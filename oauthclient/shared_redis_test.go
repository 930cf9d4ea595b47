//go:build redis

package oauthclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/internal/redistest"
	"github.com/mcp-proxy/mcp-proxy/store"
)

const sharedTestKey = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="

// replica opens a token store on srv as one replica (or CLI) does: its own
// connection to the same Redis, with the same store config.
func replica(t *testing.T, srv *redistest.Server) (*store.Store, *Store) {
	t.Helper()
	st, err := store.Open(config.Store{Type: config.StoreRedis, URL: srv.URL(), KeyPrefix: "t:", EncryptionKey: sharedTestKey}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	tokens, err := OpenShared(st)
	if err != nil {
		t.Fatal(err)
	}
	return st, tokens
}

// TestSharedLoginServesEveryReplica: a login through one replica's store
// is used by a client of another replica with no login of its own, and
// what Redis holds shows neither token nor the client secret.
func TestSharedLoginServesEveryReplica(t *testing.T) {
	srv := redistest.Start(t)
	f := newFakeAS(t)
	raw, storeA := replica(t, srv)
	_, storeB := replica(t, srv)
	a, _ := newClient(t, f, config.ServerAuth{}, Options{Store: storeA})
	if err := login(t, a, Challenge{}); err != nil {
		t.Fatal(err)
	}
	b, _ := newClient(t, f, config.ServerAuth{}, Options{Store: storeB})
	if code, err := get(t, b, nil); err != nil || code != http.StatusOK {
		t.Fatalf("replica B's request: %d, %v; want 200 with A's token", code, err)
	}
	e := a.current()
	if got := b.current(); got == nil || got.AccessToken != e.AccessToken {
		t.Fatalf("replica B holds %+v, want A's token", got)
	}
	dump, err := raw.Redis().Client().HGetAll(t.Context(), "t:oauth:web").Result()
	if err != nil || len(dump) == 0 {
		t.Fatalf("HGETALL t:oauth:web = %v, %v", dump, err)
	}
	for field, v := range dump {
		for _, secret := range []string{e.AccessToken, e.RefreshToken, e.ClientSecret, "reg-secret-value"} {
			if secret != "" && strings.Contains(v, secret) {
				t.Errorf("Redis field %q holds a secret in the clear", field)
			}
		}
	}
}

// TestSharedRefreshOneReplica: three replicas find the token about to
// expire at once; one refreshes it (the token endpoint sees one refresh
// grant, and the refresh token is single-use there), the others wait for
// its lock and use the token it stored.
func TestSharedRefreshOneReplica(t *testing.T) {
	srv := redistest.Start(t)
	f := newFakeAS(t)
	f.set(func(f *fakeAS) { f.expiresIn = 30 }) // inside refreshMargin
	var clients []*Client
	for range 3 {
		_, tokens := replica(t, srv)
		c, _ := newClient(t, f, config.ServerAuth{}, Options{Store: tokens})
		clients = append(clients, c)
	}
	if err := login(t, clients[0], Challenge{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range clients[1:] {
		if err := c.reload(true); err != nil || !c.current().hasToken() {
			t.Fatalf("a replica did not read the login: %v", err)
		}
	}
	// A refresh waits at the token endpoint until three have arrived (or
	// a while has passed), so that replicas not serialized by the store
	// all reach it.
	var mu sync.Mutex
	refreshes := 0
	arrived := make(chan struct{})
	f.set(func(f *fakeAS) {
		f.expiresIn = 3600
		f.token = func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm()
			if r.PostForm.Get("grant_type") == "refresh_token" {
				mu.Lock()
				refreshes++
				if refreshes == 3 {
					close(arrived)
				}
				mu.Unlock()
				select {
				case <-arrived:
				case <-time.After(500 * time.Millisecond):
				}
			}
			f.serveToken(w, r)
		}
	})
	var wg sync.WaitGroup
	codes := make([]int, len(clients))
	errs := make([]error, len(clients))
	for i, c := range clients {
		wg.Go(func() { codes[i], errs[i] = get(t, c, nil) })
	}
	wg.Wait()
	for i := range clients {
		if errs[i] != nil || codes[i] != http.StatusOK {
			t.Errorf("replica %d: %d, %v; want 200", i, codes[i], errs[i])
		}
	}
	if refreshes != 1 {
		t.Errorf("the token endpoint got %d refresh grants, want 1", refreshes)
	}
	tok := clients[0].current().AccessToken
	for i, c := range clients[1:] {
		if got := c.current().AccessToken; got != tok {
			t.Errorf("replica %d uses another token than replica 0", i+1)
		}
	}
}

// TestSharedTokensUnavailable: with Redis down, a request fails with an
// error naming the store and its address, not with the token this
// process read before, and works again once Redis is back.
func TestSharedTokensUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	f := newFakeAS(t)
	_, tokens := replica(t, srv)
	c, _ := newClient(t, f, config.ServerAuth{}, Options{Store: tokens})
	if err := login(t, c, Challenge{}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	c.mu.Lock()
	c.checked = time.Time{} // the next request looks at the store
	c.mu.Unlock()
	_, err := get(t, c, nil)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "shared-state store (Redis) unavailable at "+srv.Addr) {
		t.Fatalf("err = %v, want the store named unavailable", err)
	}
	st := c.Status()
	if st.State != "error" || !errors.Is(st.Err, store.ErrUnavailable) {
		t.Errorf("Status = %+v, want error naming the store", st)
	}
	srv.Start()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		code, err := get(t, c, nil)
		if err == nil && code == http.StatusOK {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after Redis came back: %d, %v", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSharedImport: Import copies a folder's entries into the shared
// store once; a second run copies nothing.
func TestSharedImport(t *testing.T) {
	srv := redistest.Start(t)
	f := newFakeAS(t)
	files, err := OpenStore(t.TempDir() + "/auth")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := newClient(t, f, config.ServerAuth{}, Options{Store: files})
	if err := login(t, c, Challenge{}); err != nil {
		t.Fatal(err)
	}
	_, shared := replica(t, srv)
	for i, want := range []int{1, 0} {
		n, err := shared.Import(files, "web", false)
		if err != nil || n != want {
			t.Fatalf("import %d: %d, %v; want %d", i, n, err, want)
		}
	}
	entries, err := shared.Load("web")
	if err != nil || len(entries) != 1 || entries[0].AccessToken != c.current().AccessToken {
		t.Fatalf("the shared store holds %d entries, %v", len(entries), err)
	}
}

// TestSharedLockLease: the refresh lock is a lease (a replica that dies
// holding it holds the others up no longer than sharedLockLease), a
// replica waiting for it gives up after its wait with an error naming
// the lock, and a holder whose lease ran out (and was taken by another)
// writes nothing.
func TestSharedLockLease(t *testing.T) {
	srv := redistest.Start(t)
	raw, a := replica(t, srv)
	_, b := replica(t, srv)
	lock := a.shared.r.Key(kindTokenLock, "web")
	token, err := a.shared.lock(lock)
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := raw.Redis().Client().PTTL(t.Context(), lock).Result()
	if err != nil || ttl <= 0 || ttl > sharedLockLease {
		t.Fatalf("the lock's time to live is %v (%v), want a lease of at most %s", ttl, err, sharedLockLease)
	}
	b.shared.lockWait = 300 * time.Millisecond
	err = b.Update("web", func(es []Entry) ([]Entry, error) { return es, nil })
	if err == nil || !strings.Contains(err.Error(), "t:oauth-lock:web is held by another replica") {
		t.Fatalf("Update while another holds the lock: %v", err)
	}
	// A's lease runs out and B takes the lock: A's write is refused.
	if err := raw.Redis().Client().Del(t.Context(), lock).Err(); err != nil {
		t.Fatal(err)
	}
	b.shared.lockWait = sharedLockWait
	done := make(chan error, 1)
	release := make(chan struct{})
	go func() {
		done <- b.Update("web", func([]Entry) ([]Entry, error) {
			<-release
			return []Entry{{ServerURL: "https://web.example/mcp", AccessToken: "from-b", Updated: time.Now()}}, nil
		})
	}()
	for {
		if v, _ := raw.Redis().Client().Get(t.Context(), lock).Result(); v != "" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n int64
	err = a.shared.r.Run(t.Context(), "test", func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		n, err = writeScript.Run(ctx, c, []string{a.shared.r.Key(kindTokens, "web"), lock}, token, "x").Int64()
		return err
	})
	if !errors.Is(err, redis.Nil) {
		t.Errorf("a write under a lease that ran out: revision %d, %v; want nothing written", n, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	entries, err := a.Load("web")
	if err != nil || len(entries) != 1 || entries[0].AccessToken != "from-b" {
		t.Fatalf("stored %+v, %v; want B's write alone", entries, err)
	}
}
