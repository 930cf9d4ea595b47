package integrity

import (
	"runtime"
	"strings"
	"testing"
)

// hostileSchema builds a tool whose inputSchema nests depth properties
// under keys of keyLen bytes and ends in an enum of members strings: each
// member costs four bytes of input, and its path is depth*keyLen long.
func hostileSchema(depth, keyLen, members int) []byte {
	var b strings.Builder
	key := strings.Repeat("k", keyLen)
	b.WriteString(`{"name":"t","inputSchema":`)
	for range depth {
		b.WriteString(`{"type":"object","properties":{"` + key + `":`)
	}
	b.WriteString(`{"type":"string","enum":[`)
	for i := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"a"`)
	}
	b.WriteString(`]}`)
	for range depth {
		b.WriteString(`}}`)
	}
	b.WriteString(`}`)
	return []byte(b.String())
}

// allocated reports the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestScanMemoryLinear: what the scan of one tool allocates does not grow
// with the length of its strings' paths. Each scanned string used to keep
// its own copy of its whole path: the 9,000 members below, under a path of
// 20 KB, made the scan copy 180 MB; a longer enum made it copy gigabytes.
// Now it allocates about what the same enum under short keys does.
func TestScanMemoryLinear(t *testing.T) {
	var shortRes, longRes scanResult
	short := allocated(func() { shortRes = scanObject(hostileSchema(20, 10, 9000)) })
	long := allocated(func() { longRes = scanObject(hostileSchema(20, 1000, 9000)) })
	if len(shortRes.findings) != 0 || len(longRes.findings) != 0 {
		t.Errorf("findings %+v and %+v, want none: the tools are under the limits", shortRes.findings, longRes.findings)
	}
	if long > 2*short+1<<20 {
		t.Errorf("the scan under 1,000-byte keys allocated %d bytes, under 10-byte keys %d: want about the same", long, short)
	}
}

// TestScanTooManyStrings: a tool with more strings to scan than
// maxScannedTexts is unreadable (held under scan: quarantine), not walked
// past the limit where an instruction could hide.
func TestScanTooManyStrings(t *testing.T) {
	obj := hostileSchema(20, 1000, maxScannedTexts+1)
	var res scanResult
	got := allocated(func() { res = scanObject(obj) })
	if len(res.findings) != 1 || res.findings[0].Kind != KindUnreadable || res.findings[0].Level != LevelQuarantine ||
		!strings.Contains(res.findings[0].Excerpt, "more than 10000 strings to scan") {
		t.Errorf("findings %+v, want one quarantine-level unreadable finding naming the limit", res.findings)
	}
	if limit := uint64(32 << 20); got > limit {
		t.Errorf("the scan of a %d-byte tool allocated %d bytes, want at most %d", len(obj), got, limit)
	}
}

// TestAppendWhere: a path longer than maxWhere keeps its start and its
// end; a shorter one is kept whole.
func TestAppendWhere(t *testing.T) {
	short := "inputSchema.properties.path.description"
	if got := string(appendWhere(nil, []byte(short))); got != short {
		t.Errorf("short path: got %q", got)
	}
	long := "inputSchema." + strings.Repeat("x", 500) + ".enum[7]"
	got := string(appendWhere(nil, []byte(long)))
	if len(got) != maxWhere || !strings.HasPrefix(got, "inputSchema.xxx") || !strings.HasSuffix(got, "xxx.enum[7]") ||
		!strings.Contains(got, whereEllipsis) {
		t.Errorf("long path: got %q (%d bytes), want its start and end in %d bytes", got, len(got), maxWhere)
	}
}
