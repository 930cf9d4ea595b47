package config

// validateBlobs checks the bounds of each agent's blob folder (docs/resources.md#blobs). A
// zero that the document wrote is refused: there is no unbounded store.
func (c *Config) validateBlobs(v *validator) {
	if c.Blobs.MaxBytes <= 0 {
		v.add("blobs.max_bytes", "must be greater than 0 (bytes per agent folder)")
	}
	if c.Blobs.MaxAge <= 0 {
		v.add("blobs.max_age", "must be greater than 0")
	}
}
