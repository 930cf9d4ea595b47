package upstream

import (
	"os"
	"sort"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/config"
)

// passedEnv are the variables of the proxy's environment a stdio child gets
// by default (docs/configuration.md#servers); XDG_* variables are passed too.
var passedEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR"}

// childEnv builds a stdio child's environment: the filtered (or, with
// inherit_env, the whole) environment of the proxy, then cfg.Env, which wins
// over anything inherited. lookup and environ default to os.LookupEnv and
// os.Environ. The result has one entry per name.
func childEnv(cfg *config.Server, lookup func(string) (string, bool), environ func() []string) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if environ == nil {
		environ = os.Environ
	}
	var env []string
	index := map[string]int{}
	set := func(k, v string) {
		if i, ok := index[k]; ok {
			env[i] = k + "=" + v
			return
		}
		index[k] = len(env)
		env = append(env, k+"="+v)
	}
	if cfg.InheritEnv {
		for _, kv := range environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				set(k, v)
			}
		}
	} else {
		for _, k := range passedEnv {
			if v, ok := lookup(k); ok {
				set(k, v)
			}
		}
		for _, kv := range environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "XDG_") {
				set(k, v)
			}
		}
	}
	keys := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		set(k, cfg.Env[k])
	}
	return env
}
