package blobs

import (
	"bytes"
	"encoding/json"
	"runtime"
	"testing"
)

// bigResult is a result holding one blob of n pseudo-random decoded bytes.
func bigResult(n int) (json.RawMessage, []byte) {
	data := make([]byte, n)
	var x uint32 = 2463534242
	for i := range data {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		data[i] = byte(x)
	}
	return resultOf(`{"type":"text","text":"here it is"}`, resourceItem("file:///out/big.bin", "application/octet-stream", data)), data
}

// TestRewriteAllocations materializes a 10 MiB blob and checks that it costs far less memory
// than the blob itself: the decoded bytes are streamed, never held.
func TestRewriteAllocations(t *testing.T) {
	const limit = 3 << 20
	in, data := bigResult(10 << 20)
	m, _ := newTestMaterializer(t, false)
	for _, want := range []string{ResultWritten, ResultReused} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out, rep, err := m.Rewrite("a", in, true)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Blobs[0].Result != want || rep.Blobs[0].Bytes != int64(len(data)) {
			t.Fatalf("outcome %+v, want %s", rep.Blobs[0], want)
		}
		if len(out) > 1024 || bytes.Contains(out, []byte(`"blob"`)) {
			t.Fatalf("output of %d bytes still holds the blob", len(out))
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d bytes allocated in %d allocations for a %d-byte blob", want, alloc, after.Mallocs-before.Mallocs, len(data))
		if alloc > limit {
			t.Fatalf("%d bytes allocated, want at most %d", alloc, limit)
		}
	}
}

// BenchmarkRewrite10MiB measures materializing one 10 MiB blob (after the first iteration the
// file exists, so this is the decode + hash + temporary write path of a reused blob).
func BenchmarkRewrite10MiB(b *testing.B) {
	in, data := bigResult(10 << 20)
	m, _ := newTestMaterializer(b, false)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := m.Rewrite("a", in, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRewrite10MiBWritten measures the full write path: a new file each iteration, synced
// and renamed.
func BenchmarkRewrite10MiBWritten(b *testing.B) {
	in, data := bigResult(10 << 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		m, _ := newTestMaterializer(b, false)
		b.StartTimer()
		if _, _, err := m.Rewrite("a", in, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRewriteNoBlobs measures the common case: a result without blobs is scanned and
// returned as is.
func BenchmarkRewriteNoBlobs(b *testing.B) {
	in := json.RawMessage(`{"content":[{"type":"text","text":"` + string(bytes.Repeat([]byte("lorem ipsum "), 1000)) + `"}],"structuredContent":{"rows":[1,2,3]}}`)
	m, _ := newTestMaterializer(b, false)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := m.Rewrite("a", in, true); err != nil {
			b.Fatal(err)
		}
	}
}
