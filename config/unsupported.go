package config

// unsupported reports the features that are parsed and validated but whose
// behaviour is not built yet, when a config uses one: "<path>: not
// supported yet". Delete an entry when its feature lands.
func (c *Config) unsupported() []error {
	var out []error
	flag := func(path string) { out = append(out, &FieldError{Path: path, Err: ErrNotSupported}) }

	for _, name := range sortedKeys(c.Servers) {
		s := c.Servers[name]
		if s == nil {
			continue
		}
		path := joinPath("servers", pathKey(name))
		if len(s.PinnedResources) > 0 {
			flag(path + ".pinned_resources")
		}
	}
	if c.isSet("untrusted_text_limit") {
		flag("untrusted_text_limit")
	}
	return out
}
