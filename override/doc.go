// Package override applies an operator's tool overrides (docs/agents.md#overrides-and-rate-limits) to what
// clients see of an upstream tool and to the calls they make: a title and
// a description that replace the upstream's, annotations merged over the
// upstream's (a null removes one), and pinned arguments, which are cut out
// of the tool's inputSchema (its top-level properties and required) and
// set in every call, where a client value for one is refused. Names are
// not this package's: the namespace package gives an overridden tool its
// name, the downstream routes it.
//
// Every edit is a splice (package rawjson): the bytes an override does not
// change reach clients and the upstream as they came.
package override
