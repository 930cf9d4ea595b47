//go:build unix

package dirperm

import (
	"io/fs"
	"syscall"
)

// fileOwner returns the user id in fi's stat data.
func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
