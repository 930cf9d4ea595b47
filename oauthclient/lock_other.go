//go:build !unix

package oauthclient

import (
	"errors"
	"io/fs"
	"os"
)

// The token store shares its folder between processes through flock,
// which this platform lacks.
func lockFile(*os.File) error   { return errors.New("file locking is not supported on this platform") }
func unlockFile(*os.File) error { return nil }
func fileID(fs.FileInfo) string { return "" }
