package config

// validateLimits checks the rate limits of docs/agents.md#overrides-and-rate-limits. A limit the document
// writes must be greater than 0: no limit is written by leaving the key
// out, never as a zero that reads like "nothing may pass".
func (c *Config) validateLimits(v *validator) {
	for _, name := range sortedKeys(c.Servers) {
		s := c.Servers[name]
		if s == nil {
			continue
		}
		path := joinPath("servers", pathKey(name)) + ".limits"
		c.positiveLimit(v, path+".per_minute", s.Limits.PerMinute, "no limit")
		c.positiveLimit(v, path+".max_concurrent", s.Limits.MaxConcurrent, "no limit")
	}
	for _, name := range sortedKeys(c.Agents) {
		a := c.Agents[name]
		if a == nil {
			continue
		}
		for i, l := range a.Limits {
			path := indexPath(joinPath("agents", pathKey(name))+".limits", i)
			if len(l.Tools) == 0 {
				v.add(path+".tools", "must name at least one tool pattern (\"*\" for every tool)")
			}
			checkPatterns(v, path+".tools", l.Tools)
			if l.PerMinute <= 0 {
				v.add(path+".per_minute", "must be greater than 0")
			}
			c.positiveLimit(v, path+".burst", l.Burst, "per_minute")
		}
	}
}

// positiveLimit refuses a limit the document set to 0 or less; absent
// means what the message's default says.
func (c *Config) positiveLimit(v *validator, path string, n int, absent string) {
	if n < 0 || n == 0 && c.isSet(path) {
		v.add(path, "must be greater than 0 (leave it out for "+absent+")")
	}
}
