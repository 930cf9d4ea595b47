// Package dirperm refuses the proxy's private directories (state_dir, its
// pins and auth folders, blobs.dir) when a user other than the proxy's may
// write to them, as OpenSSH's StrictModes refuses a writable ~/.ssh: one
// that belongs to another user (root excepted) or that its group or other
// users may write to.
//
// Another local user who can write to the pins folder can delete a pin
// file and so make the proxy trust a changed tool on first use again; one
// who can write to the auth folder can replace a token; one who can write
// to blobs.dir can swap a file the proxy hands to a model. Only the named
// directories are checked, not their parents (a path under a sticky,
// world-writable /tmp is acceptable: the check is on the directory the
// proxy owns), but a directory someone else created there, even 0755, is
// refused: its owner may delete what is in it. The proxy creates each of
// them 0700 when it is missing.
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

// ErrNotOwned is wrapped by the error of a directory that belongs to a user
// other than the proxy's and other than root.
var ErrNotOwned = errors.New("owned by another user")

// Dir is one directory to check, with the configuration key it comes
// from (state_dir, blobs.dir...) for the message.
type Dir struct {
	What string
	Path string
	// Private refuses any access by group or others, reading included
	// (a folder of secrets), and asks for chmod 700.
	Private bool
}

// Check refuses each existing directory of dirs that belongs to another
// user than the proxy's effective user or root, or that its group or other
// users may write to (a Private one: access at all); the error says what
// fixes it. A directory that does not exist is no error: the proxy creates
// it 0700 when it needs it. The owner and mode are those of the directory a
// symbolic link points to.
func Check(dirs ...Dir) error {
	return checker{euid: os.Geteuid(), owner: fileOwner}.check(dirs)
}

// checker holds what Check asks the system, so that tests can give a
// directory any owner without the privilege to chown it.
type checker struct {
	euid int // the proxy's effective user id
	// owner returns the user id that owns the file of fi; ok is false
	// where the system does not say (the owner is then not checked).
	owner func(fi fs.FileInfo) (uid int, ok bool)
}

func (c checker) check(dirs []Dir) error {
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
		case c.foreign(fi):
			uid, _ := c.owner(fi)
			yours := fmt.Sprintf("uid %d or root", c.euid)
			if c.euid == 0 {
				yours = "root"
			}
			errs = append(errs, fmt.Errorf("%s %s is %w (uid %d, not %s): that user could replace or delete its files; choose a directory of your own, or have root run: chown %d %s",
				d.What, d.Path, ErrNotOwned, uid, yours, c.euid, shellQuote(d.Path)))
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

// foreign reports whether the file of fi belongs to a user other than
// c.euid and root.
func (c checker) foreign(fi fs.FileInfo) bool {
	uid, ok := c.owner(fi)
	return ok && uid != c.euid && uid != 0
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
