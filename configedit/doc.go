// Package configedit adds a server to a config file by inserting text, so
// that the file keeps its comments, order, quoting and indentation, and a
// diff of it shows only the lines added (docs/configuration.md#adding-a-server-from-the-registry).
// It works on the YAML text: yaml.v3 only says where things start, and
// re-encoding a node tree would rewrite the whole file.
package configedit
