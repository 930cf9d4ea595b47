// Package docs holds the user documentation of mcp-proxy, one Markdown page
// per subject; README.md at the top of the repository links to each. The
// package has no code. Its tests keep the documentation true to the
// repository: every relative link in every Markdown file resolves, every
// docs page cited by the Go code exists with the cited heading, nothing cites
// the internal product specification, the README stays short, and every
// config key and every metric the proxy registers is documented
// (configuration.md, operations.md).
package docs
