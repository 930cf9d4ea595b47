package sanitize

import "strings"

// dropURLQueries cuts the query and fragment off every URL in s and replaces
// a user:password part with Redacted. A URL is "scheme://" (the scheme holds
// a letter) followed by characters up to a delimiter: white space, a quote,
// a backslash, one of <>`{}|^, or a ')' or ']' that closes nothing opened in
// the URL's scheme, host or path.
func dropURLQueries(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	ed := edits{s: s}
	for search := 0; search < len(s); {
		k := strings.Index(s[search:], "://")
		if k < 0 {
			break
		}
		sep := search + k
		rest := sep + len("://")
		if !hasScheme(s, sep) {
			search = rest
			continue
		}
		end, query := urlExtent(s, rest)
		auth := s[rest:query]
		if i := strings.IndexByte(auth, '/'); i >= 0 {
			auth = auth[:i]
		}
		at := strings.LastIndexByte(auth, '@')
		userinfo := at > 0 && auth[:at] != Redacted
		switch {
		case userinfo:
			ed.replace(rest, end, Redacted, s[rest+at:query])
		case query < end:
			ed.replace(rest, end, s[rest:query])
		}
		search = end
	}
	return ed.String()
}

// hasScheme reports whether the characters before "://" at sep form a
// scheme: a run of letters, digits, '+', '-' and '.' holding a letter.
func hasScheme(s string, sep int) bool {
	for j := sep - 1; j >= 0 && isSchemeByte(s[j]); j-- {
		if isLetter(s[j]) {
			return true
		}
	}
	return false
}

// urlExtent scans a URL from from (just after "://") and returns where it
// ends and where its query or fragment starts (end when it has none).
//
// Brackets are balanced over scheme, host and path only; inside the query a
// ')' or ']' ends the URL when the path left none open. Dropping the query
// then never lets a following ')' join the URL, which keeps Text idempotent.
func urlExtent(s string, from int) (end, query int) {
	paren, bracket := 0, 0
	query = -1
	for i := from; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= ' ' || c == '"' || c == '\'' || c == '\\' || c == '<' || c == '>' ||
			c == '`' || c == '{' || c == '}' || c == '|' || c == '^' || c == 0x7F:
			return i, queryOr(query, i)
		case c == '?' || c == '#':
			if query < 0 {
				query = i
			}
		case c == '(' && query < 0:
			paren++
		case c == '[' && query < 0:
			bracket++
		case c == ')':
			if paren == 0 {
				return i, queryOr(query, i)
			}
			if query < 0 {
				paren--
			}
		case c == ']':
			if bracket == 0 {
				return i, queryOr(query, i)
			}
			if query < 0 {
				bracket--
			}
		}
	}
	return len(s), queryOr(query, len(s))
}

func queryOr(query, end int) int {
	if query < 0 {
		return end
	}
	return query
}

func isLetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool { return isLetter(c) || isDigit(c) }

func isSchemeByte(c byte) bool { return isAlnum(c) || c == '+' || c == '-' || c == '.' }
