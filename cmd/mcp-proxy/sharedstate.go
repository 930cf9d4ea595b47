package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/oauthclient"
	"github.com/mcp-proxy/mcp-proxy/store"
)

const storeUsage = "usage: mcp-proxy store import"

// openCLIStore opens the configured shared-state store for a command that
// reads or changes state (auth, tools diff|approve, store import). The
// caller closes it.
func openCLIStore(cfg *config.Config) (*store.Store, error) {
	st, err := store.Open(cfg.Store, store.Options{})
	if err != nil {
		return nil, configErr(fmt.Errorf("store: %w", err))
	}
	return st, nil
}

// tokenStore is where OAuth tokens live: the Redis store when st is one,
// else the files under state_dir (nil without a state_dir).
func tokenStore(cfg *config.Config, st *store.Store) (*oauthclient.Store, error) {
	if st.Shared() {
		return oauthclient.OpenShared(st)
	}
	return openAuthStore(cfg)
}

// pinStore is where tool pins live: the Redis store when st is one, else
// the files under state_dir.
func pinStore(cfg *config.Config, st *store.Store) (*integrity.Store, error) {
	if st.Shared() {
		return integrity.NewSharedStore(st)
	}
	return integrity.NewStore(cfg.StateDir), nil
}

// openCLIPins opens the configured store and the tool pins in it for a
// command (tools diff|approve). done closes the store.
func openCLIPins(cfg *config.Config) (pins *integrity.Store, done func(), err error) {
	st, err := openCLIStore(cfg)
	if err != nil {
		return nil, nil, err
	}
	if pins, err = pinStore(cfg, st); err != nil {
		st.Close()
		return nil, nil, &exitError{code: exitRuntime, err: err}
	}
	return pins, func() { st.Close() }, nil
}

// runStore runs `mcp-proxy store <sub>`.
func runStore(cfg *config.Config, rest []string, stdout io.Writer) error {
	if len(rest) != 1 || rest[0] != "import" {
		return usageErr(storeUsage)
	}
	st, err := openCLIStore(cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if !st.Shared() {
		return usageErr("store import copies state_dir into a Redis store, and the config's store is %q: set store.type: redis", st.Type())
	}
	n, err := importState(cfg, st, false, func(what, server string, copied int) {
		fmt.Fprintf(stdout, "copied %d %s of server %q\n", copied, what, server)
	})
	if err != nil {
		return &exitError{code: exitRuntime, err: err}
	}
	if n == 0 {
		fmt.Fprintln(stdout, "nothing to copy: the store holds every pin and token of state_dir")
	}
	return nil
}

// importState copies state_dir's tool pins and OAuth tokens into st (a
// Redis store) and returns how many records it copied (with dryRun, would
// copy); copied is called per server with something to copy.
func importState(cfg *config.Config, st *store.Store, dryRun bool, copied func(what, server string, n int)) (int, error) {
	total := 0
	if cfg.StateDir != "" {
		src := integrity.NewStore(cfg.StateDir)
		dst, err := integrity.NewSharedStore(st)
		if err != nil {
			return 0, err
		}
		n, err := importServers(src, dst, dryRun, "pins", "tool pins", copied)
		total += n
		if err != nil {
			return total, err
		}
	}
	src, err := openAuthStore(cfg)
	if err != nil || src == nil {
		return total, err
	}
	dst, err := oauthclient.OpenShared(st)
	if err != nil {
		return total, err
	}
	n, err := importServers(src, dst, dryRun, "tokens", "token entries", copied)
	return total + n, err
}

// serverImporter is a per-server record store that copies from another of
// its kind: the tool pins' and the OAuth tokens'.
type serverImporter[S any] interface {
	Servers() ([]string, error)
	Import(src S, server string, dryRun bool) (int, error)
}

// importServers copies every server's records from src into dst and
// returns how many it copied (with dryRun, would copy), those before a
// failure included. kind names the records in an error, what in the call
// to copied.
func importServers[S serverImporter[S]](src, dst S, dryRun bool, kind, what string, copied func(what, server string, n int)) (int, error) {
	servers, err := src.Servers()
	if err != nil {
		return 0, err
	}
	total := 0
	for _, s := range servers {
		n, err := dst.Import(src, s, dryRun)
		if err != nil {
			return total, fmt.Errorf("%s of server %q: %w", kind, s, err)
		}
		if n > 0 {
			copied(what, s, n)
		}
		total += n
	}
	return total, nil
}

// noteUnimported logs, at the start of a proxy on a Redis store, the pins
// and tokens state_dir holds that the store does not: a proxy moved from
// the memory store would re-pin its tools and need new logins. A store
// that does not answer yet is logged at debug level: the proxy starts all
// the same.
func noteUnimported(cfg *config.Config, st *store.Store, log zerolog.Logger) {
	if !st.Shared() {
		return
	}
	var found []string
	_, err := importState(cfg, st, true, func(what, server string, n int) {
		found = append(found, fmt.Sprintf("%d %s of %s", n, what, server))
	})
	switch {
	case errors.Is(err, store.ErrUnavailable):
		log.Debug().Err(err).Msg("state_dir not compared with the shared-state store")
	case err != nil:
		log.Warn().Err(err).Msg("state_dir not compared with the shared-state store")
	case len(found) > 0:
		log.Warn().Strs("missing", found).Msg("state_dir holds tool pins or OAuth tokens the shared-state store does not; run `mcp-proxy store import` to copy them")
	}
}
