// Package filter decides which upstream tools an agent may see and call. It
// holds the per-server include/exclude rule now; the agent policy of SPEC §5
// (bundles, allowed/excluded tools, autonomy, approval) builds on it.
package filter
