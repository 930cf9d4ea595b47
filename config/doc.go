// Package config is the mcp-proxy configuration file: its schema (types.go),
// how it is found (Locate), read (Load, Parse), completed with defaults and
// validated, and how it is printed without secrets (Redacted,
// MarshalRedacted). It also converts the JSON server lists of other MCP hosts
// into this format (ImportJSON).
//
// Loading happens in fixed stages, each reporting every problem it finds:
//
//  1. the YAML text is parsed into a node tree (one document at most);
//  2. ${VAR} and ${env:VAR} in string values are replaced from the
//     environment ($${ is a literal ${);
//  3. the tree is checked against the schema: unknown keys, wrong kinds and
//     unparsable scalars are reported with their key path;
//  4. the tree is decoded strictly (KnownFields) into Config;
//  5. map keys become Server.Name and Agent.Name, defaults are applied, and
//     Validate checks every rule that can be checked without the network.
//
// Every problem is a *FieldError whose text starts with its key path, such as
// "servers.github.url: scheme must be http or https"; Parse joins them with
// errors.Join. No error text of this package contains a secret value (env
// values, header values, tokens): such values are never quoted, and any text
// that would still contain one is scrubbed before it is returned.
//
// A *Config is not safe for concurrent mutation; once loaded it is read-only
// by convention and may be shared between goroutines.
package config
