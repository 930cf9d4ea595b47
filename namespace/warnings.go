package namespace

import (
	"fmt"
	"strconv"
	"strings"
)

// warnNameMax bounds how many characters of a name a warning repeats, so an
// upstream sending a megabyte-long tool name cannot make a megabyte log line.
const warnNameMax = 100

// describe returns one warning per item that fell back or got a hash suffix.
// Warnings hold only server names, item names (quoted, control and format
// characters escaped, cut) and exposed names (which are [A-Za-z0-9_-]).
func describe(items []item) []string {
	var warns []string
	for _, it := range items {
		if !it.fellBack && it.shared == 0 {
			continue
		}
		var why []string
		switch {
		case it.fellBack && it.route.Name == "":
			why = append(why, "empty name cannot be exposed bare, fell back to the server-prefixed name")
		case it.fellBack:
			why = append(why, "bare name collides with another exposed name, fell back to the server-prefixed name")
		}
		switch {
		case it.yielded && it.shared > 0:
			why = append(why, "name is reserved by a tools.overrides name, hash suffix added")
		case it.shared > 0:
			why = append(why, fmt.Sprintf("name shared with %d other item(s), hash suffix added", it.shared))
		}
		warns = append(warns, fmt.Sprintf("server %s, name %s: %s; exposed as %q",
			quote(it.route.Server), quote(it.route.Name), strings.Join(why, "; "), it.name))
	}
	return warns
}

// quote renders an untrusted name for a warning: at most warnNameMax
// characters, Go-quoted with every non-graphic character (controls, bidi
// overrides, Unicode tags, invalid UTF-8) escaped.
func quote(s string) string {
	n := 0
	for i := range s {
		if n == warnNameMax {
			return strconv.QuoteToGraphic(s[:i]) + fmt.Sprintf("...(%d bytes)", len(s))
		}
		n++
	}
	return strconv.QuoteToGraphic(s)
}
