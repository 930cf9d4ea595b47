// Package ratelimit holds the two kinds of call limit of docs/agents.md#overrides-and-rate-limits: token
// buckets, which bound calls a minute, and slots, which bound calls in
// flight and hand out their places in the order the calls arrived. Both are
// safe for concurrent use and cost one mutex per call. Buckets take the
// time from their caller, so tests run on a clock of their own.
package ratelimit
