package status

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mcp-proxy/mcp-proxy/internal/randid"
)

const (
	// tokenBytes is the status token's size: 256 random bits, which no
	// guessing finds, throttled or not.
	tokenBytes = 32
	// tokenDirMode and tokenFileMode keep the token to the proxy's user.
	tokenDirMode  fs.FileMode = 0o700
	tokenFileMode fs.FileMode = 0o600
	// TokenParam is the query parameter of the sign-in address
	// (http://<metrics.listen>/?token=...).
	TokenParam = "token"
)

// ErrNoStateDir is returned by LoadToken when there is no state_dir to keep
// the token in.
var ErrNoStateDir = errors.New("status token: no state_dir (set state_dir, $XDG_STATE_HOME or $HOME)")

// TokenPath is the file of the status token under stateDir:
// <state_dir>/status/token.
func TokenPath(stateDir string) string { return filepath.Join(stateDir, "status", "token") }

// LoadToken returns the status token kept in stateDir, and creates it (32
// random bytes, base64url, in a file 0600 in a folder 0700) when there is
// none. The token lasts until its file is deleted: every proxy and CLI
// command that uses stateDir reads the same one, so `mcp-proxy status url`
// prints the token of the running proxy. Two processes that create it at
// once agree: the file is linked into place whole, and the loser reads the
// winner's. A folder or file that other users may read or write, a symbolic
// link, or a file that does not hold a token is refused; the error says how
// to repair it and never holds the token.
func LoadToken(stateDir string) (string, error) {
	if stateDir == "" {
		return "", ErrNoStateDir
	}
	path := TokenPath(stateDir)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, tokenDirMode); err != nil {
		return "", fmt.Errorf("status token: %w", err)
	}
	if err := privateDir(dir); err != nil {
		return "", err
	}
	tok, err := readToken(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createToken(path); err != nil {
			return "", err
		}
		tok, err = readToken(path)
	}
	return tok, err
}

// privateDir refuses a token folder that is a symbolic link, not a folder,
// or open to other users.
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("status token: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("status token: %s is not a directory", dir)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("status token: %s is accessible to other users (mode %04o); run `chmod 700 %s`", dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// readToken reads the token file without following a symbolic link.
func readToken(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", fmt.Errorf("status token: %s is a symbolic link; delete it", path)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("status token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("status token: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("status token: %s is not a regular file; delete it", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("status token: %s is accessible to other users (mode %04o): delete it (a new token is made at the next start) or run `chmod 600 %s`",
			path, fi.Mode().Perm(), path)
	}
	buf := make([]byte, 128)
	n, _ := f.Read(buf)
	tok := strings.TrimSpace(string(buf[:n]))
	if !validToken(tok) {
		return "", fmt.Errorf("status token: %s does not hold a token; delete it (a new one is made at the next start)", path)
	}
	return tok, nil
}

// validToken reports whether s has the form of a status token.
func validToken(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == tokenBytes
}

// createToken writes a new token to a temporary file and links it to path,
// which fails without harm when another process made it first.
func createToken(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return fmt.Errorf("status token: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.WriteString(randid.Base64URL(tokenBytes) + "\n")
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp, tokenFileMode)); err != nil {
		return fmt.Errorf("status token: %w", err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("status token: %w", err)
	}
	return nil
}
