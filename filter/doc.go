// Package filter decides which upstream tools an agent may see and call. It
// holds the per-server include/exclude rule now; the agent policy of docs/agents.md#agents-bundles-and-policy
// (bundles, allowed/excluded tools, autonomy, approval) builds on it.
package filter
