package integrity

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// decodePinFile reads the JSON of a pin file in one pass with a
// rawjson.Reader, the definitions as slices of data: encoding/json's
// decoding into pinFile copied every definition, and picking members level
// by level scanned a definition once per level (file, tools, entry,
// record), most of a proxy's start-up check with thousands of pinned
// tools. It reads what Store.write writes as encoding/json would, with two
// differences for files a person edited: a member given twice is an error
// rather than a guess (encoding/json takes the last), and member names
// must be written as Store.write writes them (encoding/json also matches
// them in other letter case). Unknown members are ignored and a null
// member is as if absent, as encoding/json does. It does not check the
// content; parsePinFile does.
func decodePinFile(data []byte) (*pinFile, error) {
	if len(data) == 0 {
		return nil, errors.New("empty")
	}
	if rawjson.IsNull(data) {
		return &pinFile{}, nil
	}
	d := pinReader{r: rawjson.NewReader(data)}
	var pf pinFile
	end, err := d.members(0, fileMembers, func(i, vs int) (int, error) {
		if i == 2 {
			return d.tools(vs, &pf)
		}
		v, end, err := d.value(vs)
		switch {
		case err != nil:
		case i == 1:
			err = unquoteTo(&pf.Server, v, "server")
		case !rawjson.IsNull(v):
			if pf.Version, err = strconv.Atoi(string(v)); err != nil {
				err = errors.New("version is not an integer")
			}
		}
		return end, err
	})
	if err != nil {
		return nil, err
	}
	if err := d.r.End(end); err != nil {
		return nil, invalidJSON(err)
	}
	return &pf, nil
}

// The members each level of a pin file reads, in the order of the index
// pinReader.members gives its callback.
var (
	fileMembers   = []string{"version", "server", "tools"}
	entryMembers  = []string{"pinned", "pending"}
	recordMembers = []string{"fingerprint", "since", "reason", "definition"}
)

// pinReader reads the levels of one pin file from a single rawjson.Reader.
// Its errors name the pin file's problem: a syntax error is "not valid
// JSON", a member given twice a *rawjson.DuplicateError. It stops at the
// first problem in document order, so of a file with several the first
// is reported.
type pinReader struct{ r *rawjson.Reader }

// tools reads the tools object (or null) at vs into pf.Tools.
func (d pinReader) tools(vs int, pf *pinFile) (int, error) {
	if end, null, err := d.null(vs); null || err != nil {
		return end, err
	}
	if b := d.r.Bytes(); vs < len(b) && b[vs] != '{' {
		return 0, fmt.Errorf("tools: %v", rawjson.ErrNotObject) // valid JSON of another type
	}
	pf.Tools = map[string]*pinEntry{}
	return d.object(vs, func(name string, vs int) (int, error) {
		if _, dup := pf.Tools[name]; dup {
			return 0, fmt.Errorf("tool %q is listed twice", name)
		}
		e, end, err := d.entry(vs)
		if err != nil {
			return 0, fmt.Errorf("tool %q: %w", name, err)
		}
		pf.Tools[name] = e
		return end, nil
	})
}

// entry reads one tool's entry; nil for null.
func (d pinReader) entry(vs int) (*pinEntry, int, error) {
	return readOrNull(d, vs, entryMembers, func(e *pinEntry, i, vs int) (int, error) {
		rec, end, err := d.record(vs)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", entryMembers[i], err)
		}
		if i == 0 {
			e.Pinned = rec
		} else {
			e.Pending = rec
		}
		return end, nil
	})
}

// record reads one record; nil for null. Its Definition is a slice of the
// file's data.
func (d pinReader) record(vs int) (*pinRecord, int, error) {
	return readOrNull(d, vs, recordMembers, func(r *pinRecord, i, vs int) (int, error) {
		v, end, err := d.value(vs)
		if err != nil {
			return 0, err
		}
		switch i {
		case 0:
			err = unquoteTo(&r.Fingerprint, v, "fingerprint")
		case 1:
			if !rawjson.IsNull(v) {
				if terr := r.Since.UnmarshalJSON(v); terr != nil {
					err = fmt.Errorf("since is not a time: %v", terr)
				}
			}
		case 2:
			var reason string
			err = unquoteTo(&reason, v, "reason")
			r.Reason = Reason(reason)
		default:
			r.Definition = json.RawMessage(v[:len(v):len(v)]) // null too, as encoding/json keeps it
		}
		return end, err
	})
}

// readOrNull reads the object at vs into a new T, each member named in
// names with read (d.members), or nil for null.
func readOrNull[T any](d pinReader, vs int, names []string, read func(t *T, i, vs int) (int, error)) (*T, int, error) {
	if end, null, err := d.null(vs); null || err != nil {
		return nil, end, err
	}
	t := new(T)
	end, err := d.members(vs, names, func(i, vs int) (int, error) { return read(t, i, vs) })
	return t, end, err
}

// members reads the object at vs: read reads each member named in names
// (given its index there and the offset of its value), any other member is
// validated and skipped, and a named member given twice is an error.
func (d pinReader) members(vs int, names []string, read func(i, vs int) (int, error)) (int, error) {
	var seen uint
	return d.object(vs, func(key string, vs int) (int, error) {
		i := slices.Index(names, key)
		switch {
		case i < 0:
			return d.skip(vs)
		case seen&(1<<i) != 0:
			return 0, &rawjson.DuplicateError{Name: key}
		}
		seen |= 1 << i
		return read(i, vs)
	})
}

// object is rawjson.Reader.Object with its own syntax errors said as the
// pin file's; fn's errors are returned as fn made them.
func (d pinReader) object(vs int, fn func(key string, vs int) (int, error)) (int, error) {
	var inner error
	end, err := d.r.Object(vs, func(key string, _, vs int) (int, error) {
		end, err := fn(key, vs)
		inner = err
		return end, err
	})
	if err != nil && inner == nil {
		err = invalidJSON(err)
	}
	return end, err
}

// skip validates the value at vs and returns its end.
func (d pinReader) skip(vs int) (int, error) {
	end, err := d.r.Skip(vs)
	if err != nil {
		return 0, invalidJSON(err)
	}
	return end, nil
}

// value validates the value at vs and returns it and its end.
func (d pinReader) value(vs int) ([]byte, int, error) {
	end, err := d.skip(vs)
	if err != nil {
		return nil, 0, err
	}
	return d.r.Bytes()[vs:end], end, nil
}

// null reads the value at vs when it is null (null is then true).
func (d pinReader) null(vs int) (end int, null bool, err error) {
	if b := d.r.Bytes(); vs >= len(b) || b[vs] != 'n' {
		return 0, false, nil
	}
	end, err = d.skip(vs)
	return end, err == nil, err
}

func invalidJSON(err error) error { return fmt.Errorf("not valid JSON: %v", err) }

// unquoteTo sets *dst to the string v (unchanged for null or absent).
func unquoteTo(dst *string, v []byte, what string) error {
	if rawjson.IsNull(v) {
		return nil
	}
	s, err := rawjson.Unquote(v)
	if err != nil {
		return fmt.Errorf("%s is not a string", what)
	}
	*dst = s
	return nil
}
