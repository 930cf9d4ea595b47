// Package dirperm refuses the proxy's private directories (state_dir, its
// pins and auth folders, blobs.dir) when a user other than their owner may
// write to them, as OpenSSH's StrictModes refuses a writable ~/.ssh.
//
// Another local user who can write to the pins folder can delete a pin
// file and so make the proxy trust a changed tool on first use again; one
// who can write to the auth folder can replace a token; one who can write
// to blobs.dir can swap a file the proxy hands to a model. Only the named
// directories are checked, not their parents (a path under a sticky,
// world-writable /tmp is acceptable: the check is on the directory the
// proxy owns). The proxy creates each of them 0700 when it is missing.
package dirperm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrWritable is wrapped by the error of a directory that its group or
// other users may write to.
var ErrWritable = errors.New("writable by other users")

// ErrAccessible is wrapped by the error of a Private directory that its
// group or other users may read, enter or write.
var ErrAccessible = errors.New("accessible to other users")

// Dir is one directory to check, with the configuration key it comes
// from (state_dir, blobs.dir...) for the message.
type Dir struct {
	What string
	Path string
	// Private refuses any access by group or others, reading included
	// (a folder of secrets), and asks for chmod 700.
	Private bool
}

// Check refuses each existing directory of dirs that its group or other
// users may write to (a Private one: access at all); the error says which
// chmod fixes it. A directory
// that does not exist is no error: the proxy creates it 0700 when it
// needs it. The mode is that of the directory a symbolic link points to.
func Check(dirs ...Dir) error {
	var errs []error
	for _, d := range dirs {
		if d.Path == "" {
			continue
		}
		fi, err := os.Stat(d.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %s: %w", d.What, d.Path, err))
		case !fi.IsDir():
			errs = append(errs, fmt.Errorf("%s %s is not a directory", d.What, d.Path))
		case d.Private && fi.Mode().Perm()&0o077 != 0:
			errs = append(errs, fmt.Errorf("%s %s is %w (mode %04o): other local users could read or replace the secrets in it; run: chmod 700 %s",
				d.What, d.Path, ErrAccessible, fi.Mode().Perm(), shellQuote(d.Path)))
		case fi.Mode().Perm()&0o022 != 0:
			errs = append(errs, fmt.Errorf("%s %s is %w (mode %04o): another local user could replace or delete its files; run: chmod go-w %s",
				d.What, d.Path, ErrWritable, fi.Mode().Perm(), shellQuote(d.Path)))
		}
	}
	return errors.Join(errs...)
}

// shellQuote quotes p for a POSIX shell when it holds anything but the
// characters of an ordinary path.
func shellQuote(p string) string {
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '/' || r == '.' || r == '_' || r == '-' || r == '+' || r == ',' || r == ':' || r == '@') {
			out := []byte{'\''}
			for i := 0; i < len(p); i++ {
				if p[i] == '\'' {
					out = append(out, `'\''`...)
				} else {
					out = append(out, p[i])
				}
			}
			return string(append(out, '\''))
		}
	}
	return p
}
