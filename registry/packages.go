package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// The public package registries asked for a package's latest version.
const (
	DefaultNPMURL  = "https://registry.npmjs.org"
	DefaultPyPIURL = "https://pypi.org"
)

// PackageIndex asks the npm and PyPI registries whether a package version
// exists and which one is the latest. The zero value asks the public
// registries.
type PackageIndex struct {
	// NPMURL and PyPIURL are the registries' base URLs; "" means the
	// public ones.
	NPMURL  string
	PyPIURL string
	// HTTP sends the requests; nil means a client with a 30-second
	// timeout.
	HTTP *http.Client
}

var (
	// npmName is an npm package name: an optional @scope/, lower case.
	npmName = regexp.MustCompile(`^(@[a-z0-9~-][a-z0-9._~-]*/)?[a-z0-9~-][a-z0-9._~-]*$`)
	// pypiName is a PyPI project name (PEP 508).
	pypiName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	// versionText is what a version (or an npm dist-tag) may be made of,
	// in a URL path and on a command line.
	versionText = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_!-]*$`)
)

// maxPackageName is npm's limit on a package name; PyPI's is lower.
const maxPackageName = 214

// SplitNPM splits "pkg@1.2.3" or "@scope/pkg@1.2.3" into the name and the
// version ("" when none is given).
func SplitNPM(spec string) (name, version string) {
	at := strings.LastIndexByte(spec, '@')
	if at <= 0 {
		return spec, ""
	}
	return spec[:at], spec[at+1:]
}

// SplitPyPI splits "pkg==1.2.3" into the name and the version.
func SplitPyPI(spec string) (name, version string) {
	name, version, _ = strings.Cut(spec, "==")
	return name, version
}

// npmMaxBytes caps an npm package document: the abbreviated document of
// a package with thousands of versions runs to a few MiB.
const npmMaxBytes = 32 << 20

// npmAbbreviated asks the npm registry for the abbreviated package
// document, which lists versions and dist-tags without each version's
// readme.
const npmAbbreviated = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8"

// NPMVersion checks the npm package name and returns version when the
// registry has it, or the "latest" dist-tag when version is "" (a
// dist-tag given as the version, such as "next", is resolved the same
// way).
func (x *PackageIndex) NPMVersion(ctx context.Context, name, version string) (string, error) {
	if len(name) > maxPackageName || !npmName.MatchString(name) {
		return "", fmt.Errorf("%q is not an npm package name", name)
	}
	u := indexURL(x.NPMURL, DefaultNPMURL, "/"+url.PathEscape(name))
	var doc struct {
		DistTags map[string]string          `json:"dist-tags"`
		Versions map[string]json.RawMessage `json:"versions"`
	}
	if err := x.fetch(ctx, u, npmMaxBytes, map[string]string{"Accept": npmAbbreviated}, &doc); err != nil {
		return "", notFoundAs(err, "npm", name, "")
	}
	want := version
	if want == "" {
		want = "latest"
	}
	if tagged, ok := doc.DistTags[want]; ok {
		want = tagged
	}
	if _, ok := doc.Versions[want]; !ok {
		if version == "" {
			return "", fmt.Errorf("%w: %s: the latest dist-tag names no listed version", ErrBadResponse, shownURL(u))
		}
		return "", fmt.Errorf("%w: npm has no version %q of %q", ErrNoVersion, version, name)
	}
	return checkedVersion(want, u)
}

// PyPIVersion is NPMVersion for a PyPI project.
func (x *PackageIndex) PyPIVersion(ctx context.Context, name, version string) (string, error) {
	if len(name) > maxPackageName || !pypiName.MatchString(name) {
		return "", fmt.Errorf("%q is not a PyPI project name", name)
	}
	u := indexURL(x.PyPIURL, DefaultPyPIURL, "/pypi/"+url.PathEscape(name))
	if version != "" {
		if !versionText.MatchString(version) {
			return "", fmt.Errorf("%q is not a version", version)
		}
		u += "/" + url.PathEscape(version)
	}
	u += "/json"
	var doc struct {
		Info struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	if err := x.fetch(ctx, u, MaxResponseBytes, nil, &doc); err != nil {
		return "", notFoundAs(err, "PyPI", name, version)
	}
	return checkedVersion(doc.Info.Version, u)
}

// indexURL is path under base, or under def when base is "".
func indexURL(base, def, path string) string {
	if base == "" {
		base = def
	}
	return strings.TrimSuffix(base, "/") + path
}

// errPackageNotFound marks a 404 inside this file.
type errPackageNotFound struct{}

func (errPackageNotFound) Error() string { return "not found" }

func (x *PackageIndex) fetch(ctx context.Context, u string, limit int64, headers map[string]string, dst any) error {
	c := &Client{BaseURL: u, HTTP: x.HTTP, Headers: headers}
	data, found, err := c.getLimit(ctx, u, limit)
	if err != nil {
		return err
	}
	if !found {
		return errPackageNotFound{}
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return fmt.Errorf("%w: %s: %s", ErrBadResponse, shownURL(u), jsonProblem(err))
	}
	return nil
}

func notFoundAs(err error, where, name, version string) error {
	if _, ok := err.(errPackageNotFound); !ok {
		return err
	}
	if version != "" {
		return fmt.Errorf("%w: %s has no version %q of %q", ErrNoVersion, where, version, name)
	}
	return fmt.Errorf("%w: %s has no package %q", ErrNotFound, where, name)
}

func checkedVersion(v, u string) (string, error) {
	if !versionText.MatchString(v) || len(v) > 255 {
		return "", fmt.Errorf("%w: %s: no usable version in the answer", ErrBadResponse, shownURL(u))
	}
	return v, nil
}
