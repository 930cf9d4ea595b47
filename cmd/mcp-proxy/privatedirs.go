package main

import (
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/integrity"
	"github.com/mcp-proxy/mcp-proxy/internal/dirperm"
)

// checkPrivateDirs refuses to go on when state_dir, its pins folder or
// blobs.dir (when blobs go to files) is writable by group or other users,
// or the auth folder accessible to them at all, as the token store
// requires (see internal/dirperm): every verb that reads or writes
// them (serve, tools and its sub-verbs, call, auth) checks before it
// starts. Folders that do not exist yet are created 0700 when needed.
func checkPrivateDirs(cfg *config.Config) error {
	dirs := []dirperm.Dir{{What: "state_dir", Path: cfg.StateDir}}
	if cfg.StateDir != "" {
		dirs = append(dirs,
			dirperm.Dir{What: "the pins folder", Path: integrity.NewStore(cfg.StateDir).Dir()},
			dirperm.Dir{What: "the auth folder", Path: cfg.AuthDir(), Private: true})
	}
	if cfg.Blobs.Mode == "file" {
		dirs = append(dirs, dirperm.Dir{What: "blobs.dir", Path: cfg.Blobs.Dir})
	}
	if err := dirperm.Check(dirs...); err != nil {
		return &exitError{code: exitRuntime, err: err}
	}
	return nil
}
