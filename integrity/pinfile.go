package integrity

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// decodePinFile reads the JSON of a pin file with rawjson, the definitions
// as slices of data: encoding/json's decoding into pinFile copied every
// definition, most of a proxy's start-up check with thousands of pinned
// tools. Each level (file, tools, entry, record) validates what it picks,
// so a definition is scanned once per level; decoding a 100-tool file
// takes about two thirds of encoding/json's time. It reads what Store.write
// writes as encoding/json would, with two differences for files a person
// edited: a member given twice is an error rather than a guess
// (encoding/json takes the last), and member names must be written as
// Store.write writes them (encoding/json also matches them in other letter
// case). Unknown members are ignored and a null member is as if absent,
// as encoding/json does. It does not check the content; parsePinFile does.
func decodePinFile(data []byte) (*pinFile, error) {
	if len(data) == 0 {
		return nil, errors.New("empty")
	}
	if rawjson.IsNull(data) {
		return &pinFile{}, nil
	}
	v, err := pick(data, "version", "server", "tools")
	if err != nil {
		return nil, err
	}
	var pf pinFile
	if !rawjson.IsNull(v[0]) {
		if pf.Version, err = strconv.Atoi(string(v[0])); err != nil {
			return nil, errors.New("version is not an integer")
		}
	}
	if err := unquoteTo(&pf.Server, v[1], "server"); err != nil {
		return nil, err
	}
	if rawjson.IsNull(v[2]) {
		return &pf, nil
	}
	tools, err := rawjson.Members(v[2])
	if err != nil {
		return nil, fmt.Errorf("tools: %v", err)
	}
	pf.Tools = make(map[string]*pinEntry, len(tools))
	for _, m := range tools {
		name := m.Key
		if _, dup := pf.Tools[name]; dup {
			return nil, fmt.Errorf("tool %q is listed twice", name)
		}
		e, err := decodePinEntry(v[2][m.ValueStart:m.ValueEnd])
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", name, err)
		}
		pf.Tools[name] = e
	}
	return &pf, nil
}

// decodePinEntry reads one tool's entry; nil for null.
func decodePinEntry(data []byte) (*pinEntry, error) {
	if rawjson.IsNull(data) {
		return nil, nil
	}
	v, err := pick(data, "pinned", "pending")
	if err != nil {
		return nil, err
	}
	var e pinEntry
	if e.Pinned, err = decodePinRecord(v[0]); err != nil {
		return nil, fmt.Errorf("pinned: %w", err)
	}
	if e.Pending, err = decodePinRecord(v[1]); err != nil {
		return nil, fmt.Errorf("pending: %w", err)
	}
	return &e, nil
}

// decodePinRecord reads one record; nil for null or absent. Its
// Definition is a slice of data.
func decodePinRecord(data []byte) (*pinRecord, error) {
	if rawjson.IsNull(data) {
		return nil, nil
	}
	v, err := pick(data, "fingerprint", "since", "reason", "definition")
	if err != nil {
		return nil, err
	}
	var r pinRecord
	var reason string
	if err := unquoteTo(&r.Fingerprint, v[0], "fingerprint"); err != nil {
		return nil, err
	}
	if !rawjson.IsNull(v[1]) {
		if err := r.Since.UnmarshalJSON(v[1]); err != nil {
			return nil, fmt.Errorf("since is not a time: %v", err)
		}
	}
	if err := unquoteTo(&reason, v[2], "reason"); err != nil {
		return nil, err
	}
	r.Reason = Reason(reason)
	if v[3] != nil {
		r.Definition = json.RawMessage(v[3][:len(v[3]):len(v[3])]) // null too, as encoding/json keeps it
	}
	return &r, nil
}

// pick is rawjson.Pick, a syntax error said as the pin file's problem.
func pick(obj []byte, names ...string) ([]json.RawMessage, error) {
	v, err := rawjson.Pick(obj, names...)
	if err != nil && !errors.Is(err, rawjson.ErrDuplicateMember) {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	return v, err
}

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
