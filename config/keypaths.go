package config

import "reflect"

// KeyPaths lists the path of every key the strict decoder accepts in a
// config file, in the order of the Config fields: "servers",
// "servers.<>.timeout", "agents.<>.limits[].burst"... A name the user
// chooses (a map key) is written <>, an item of a list []. A value that
// decodes itself (a Duration, a StringList) or holds free-form data ends
// the path: what is inside it is a value, not a key. The docs test checks
// that docs/configuration.md documents each of them; the keys come from
// the same field table the decoder reads (yamlFields).
func KeyPaths() []string {
	return keyPaths(reflect.TypeFor[Config]())
}

// keyPaths walks t as the shape check does (see shapeChecker.walk).
func keyPaths(t reflect.Type) []string {
	var keys []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if reflect.PointerTo(t).Implements(unmarshalerType) {
			return
		}
		switch t.Kind() {
		case reflect.Struct:
			fields := yamlFields(t)
			// In the order of the fields, not of the map.
			names := make([]string, 0, len(fields))
			for i := range t.NumField() {
				if name, ok := fieldKey(t.Field(i)); ok {
					names = append(names, name)
				}
			}
			for _, name := range names {
				key := joinKey(prefix, name)
				keys = append(keys, key)
				walk(fields[name], key)
			}
		case reflect.Map:
			walk(t.Elem(), prefix+".<>")
		case reflect.Slice:
			walk(t.Elem(), prefix+"[]")
		}
	}
	walk(t, "")
	return keys
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
