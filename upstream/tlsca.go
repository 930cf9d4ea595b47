package upstream

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// maxCAFileBytes bounds tls_ca_cert_path (seed: at most 1 MiB). A CA bundle
// is a few KiB; the cap keeps a wrong path (a log, a disk image) from being
// read whole.
const maxCAFileBytes = 1 << 20

// maxRedirects caps the redirects one request may follow, as net/http's
// default does.
const maxRedirects = 10

// LoadCAPool reads the PEM certificates at path (tls_ca_cert_path,
// docs/configuration.md#servers) and returns the system roots plus them (an empty pool plus them
// where the system has none). path must be absolute. Symbolic links are
// followed and the opened file is checked: it must be a regular file (a
// directory, device, FIFO or socket is refused; opening never blocks on a
// FIFO), at most 1 MiB, holding at least one PEM CERTIFICATE block, every
// one of which must parse. Errors name the path and the reason.
func LoadCAPool(path string) (*x509.CertPool, error) {
	pemBytes, err := readCAFile(path)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for rest, n := pemBytes, 0; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			continue // a key or parameters next to the certificates
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tls_ca_cert_path %q: PEM block %d: %w", path, n, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("tls_ca_cert_path %q: no PEM CERTIFICATE block found", path)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// readCAFile opens path without blocking, checks what was opened, and reads
// at most maxCAFileBytes of it.
func readCAFile(path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("tls_ca_cert_path %q: must be an absolute path", path)
	}
	// O_NONBLOCK makes opening a FIFO return at once instead of waiting
	// for a writer. On a regular file, the only kind read below, the flag
	// has no effect, so it need not be cleared.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("tls_ca_cert_path %q: cannot open: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("tls_ca_cert_path %q: cannot stat: %w", path, err)
	}
	if kind := irregularKind(info.Mode()); kind != "" {
		return nil, fmt.Errorf("tls_ca_cert_path %q: is %s, not a regular file", path, kind)
	}
	if info.Size() > maxCAFileBytes {
		return nil, fmt.Errorf("tls_ca_cert_path %q: file is larger than %d bytes", path, maxCAFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCAFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tls_ca_cert_path %q: cannot read: %w", path, err)
	}
	if len(b) > maxCAFileBytes { // it grew after Stat
		return nil, fmt.Errorf("tls_ca_cert_path %q: file is larger than %d bytes", path, maxCAFileBytes)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("tls_ca_cert_path %q: file is empty", path)
	}
	return b, nil
}

// irregularKind names a file mode that is not a regular file, or "".
func irregularKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return ""
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "of mode " + strconv.Quote(m.Type().String())
}

// requireHTTPS returns an error unless u is an https URL with a host. It is
// checked for the server URL and for the endpoint a legacy SSE server
// advertises when tls_ca_cert_path is set.
func requireHTTPS(u *url.URL) error {
	if u == nil {
		return errors.New("no URL: an https:// URL is required with tls_ca_cert_path")
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("URL %q is not https://: plain http is refused with tls_ca_cert_path", safeURL(u))
	}
	return nil
}

// noDowngradeRedirect is an http.Client CheckRedirect that refuses a
// redirect to anything but https:// and stops after maxRedirects. It runs
// before the redirected request is sent, so nothing (no header, no body)
// reaches a plain-http address.
func noDowngradeRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Scheme != "https" {
		return fmt.Errorf("refusing redirect to %q: not https://", safeURL(req.URL))
	}
	return capRedirects(via)
}

// noDowngrade is newHTTPClient's default CheckRedirect: it refuses only a
// redirect from https to anything else, so a plain-http server may still
// redirect within plain http.
func noDowngrade(req *http.Request, via []*http.Request) error {
	if len(via) > 0 && via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refusing redirect from https to %q", safeURL(req.URL))
	}
	return capRedirects(via)
}

func capRedirects(via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// safeURL is u without user info, query and fragment, for error texts.
func safeURL(u *url.URL) string {
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, Opaque: u.Opaque}
	return c.String()
}
