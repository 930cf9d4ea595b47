package integrity

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcp-proxy/mcp-proxy/rawjson"
)

// decodePinFile reads the JSON of a pin file in one pass with rawjson,
// the definitions as slices of data: encoding/json's decoding into
// pinFile scanned every definition twice and copied it, most of a proxy's
// start-up check with thousands of pinned tools. It reads what Store.write
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
	var pf pinFile
	err := eachMember(data, true, func(key string, v []byte) error {
		switch key {
		case "version":
			if rawjson.IsNull(v) {
				return nil
			}
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return errors.New("version is not an integer")
			}
			pf.Version = n
		case "server":
			return unquoteTo(&pf.Server, v, "server")
		case "tools":
			if rawjson.IsNull(v) {
				return nil
			}
			pf.Tools = map[string]*pinEntry{}
			// Not checked by eachMember: a file may hold thousands of tools.
			return eachMember(v, false, func(name string, v []byte) error {
				if _, dup := pf.Tools[name]; dup {
					return fmt.Errorf("tool %q is listed twice", name)
				}
				e, err := decodePinEntry(v)
				if err != nil {
					return fmt.Errorf("tool %q: %w", name, err)
				}
				pf.Tools[name] = e
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &pf, nil
}

// decodePinEntry reads one tool's entry; nil for null.
func decodePinEntry(v []byte) (*pinEntry, error) {
	if rawjson.IsNull(v) {
		return nil, nil
	}
	var e pinEntry
	err := eachMember(v, true, func(key string, v []byte) (err error) {
		switch key {
		case "pinned":
			e.Pinned, err = decodePinRecord(v)
		case "pending":
			e.Pending, err = decodePinRecord(v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// decodePinRecord reads one record; nil for null. Its Definition is a
// slice of v.
func decodePinRecord(v []byte) (*pinRecord, error) {
	if rawjson.IsNull(v) {
		return nil, nil
	}
	var r pinRecord
	err := eachMember(v, true, func(key string, v []byte) error {
		switch key {
		case "fingerprint":
			return unquoteTo(&r.Fingerprint, v, key)
		case "reason":
			var s string
			err := unquoteTo(&s, v, key)
			r.Reason = Reason(s)
			return err
		case "since":
			if rawjson.IsNull(v) {
				return nil
			}
			if err := r.Since.UnmarshalJSON(v); err != nil {
				return fmt.Errorf("since is not a time: %v", err)
			}
		case "definition":
			if !rawjson.IsNull(v) {
				r.Definition = json.RawMessage(v[:len(v):len(v)])
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// eachMember calls fn with each member of the object obj (null: none) and
// stops at fn's first error. unique refuses a name given twice; it is for
// small objects, since it compares every pair.
func eachMember(obj []byte, unique bool, fn func(key string, v []byte) error) error {
	if rawjson.IsNull(obj) {
		return nil
	}
	ms, err := rawjson.Members(obj)
	if err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	for i, m := range ms {
		for j := 0; unique && j < i; j++ {
			if ms[j].Key == m.Key {
				return fmt.Errorf("member %q is given twice", m.Key)
			}
		}
		if err := fn(m.Key, obj[m.ValueStart:m.ValueEnd]); err != nil {
			return err
		}
	}
	return nil
}

// unquoteTo sets *dst to the string v ("" for null).
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
