package metrics

import "github.com/prometheus/client_golang/prometheus"

// BlobStore is the gauge of the blob files each agent folder holds (docs/resources.md#blobs).
// A nil *BlobStore records nothing. Safe for concurrent use.
type BlobStore struct {
	bytes *prometheus.GaugeVec
}

// NewBlobStore creates mcp_proxy_blob_store_bytes{agent} and registers it on
// reg.
func NewBlobStore(reg prometheus.Registerer) (*BlobStore, error) {
	b := &BlobStore{bytes: spec{Name: "mcp_proxy_blob_store_bytes", Labels: []string{"agent"}, Help: "Bytes of blob files in each agent's folder under blobs.dir, after eviction."}.gauge()}
	if err := reg.Register(b.bytes); err != nil {
		return nil, err
	}
	return b, nil
}

// Set records the size of one agent folder; it fits blobs.Options.OnStoreSize.
func (b *BlobStore) Set(agent string, bytes int64) {
	if b == nil {
		return
	}
	b.bytes.WithLabelValues(agent).Set(float64(bytes))
}
