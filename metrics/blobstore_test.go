package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBlobStoreGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := NewBlobStore(reg)
	if err != nil {
		t.Fatal(err)
	}
	b.Set("alice", 1500)
	b.Set("alice", 1200)
	b.Set("bob", 7)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "mcp_proxy_blob_store_bytes" || f.GetType().String() != "GAUGE" {
			t.Fatalf("unexpected family %s %s", f.GetName(), f.GetType())
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetName()+"="+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if len(got) != 2 || got["agent=alice"] != 1200 || got["agent=bob"] != 7 {
		t.Errorf("gauge = %v", got)
	}
	var nilStore *BlobStore
	nilStore.Set("x", 1)
}
