package httpguard

import "testing"

// BenchmarkHostAllowed is the check of every request of a loopback
// listener (the MCP endpoint's and the metrics listener's).
func BenchmarkHostAllowed(b *testing.B) {
	r := req("127.0.0.1:8080", "127.0.0.1:8080", "")
	b.ReportAllocs()
	for b.Loop() {
		if !HostAllowed(r) || !OriginAllowed(r) {
			b.Fatal("refused")
		}
	}
}
