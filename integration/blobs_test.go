package integration

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixtureBlob is the fixture's blob tool's item k of n bytes: byte j is
// byte(j*131 + k*17 + j>>8).
func fixtureBlob(k, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(j*131 + k*17 + j>>8)
	}
	return b
}

// TestBlobsToFiles: with the default blobs mode (file), the fixture's two
// embedded blobs reach the client as `[Document: blob.bin] <path>` text items,
// each followed by a resource_link to the file, never as base64; the files
// under <blobs.dir>/default/ hold exactly the decoded bytes. A client on
// 2025-03-26, which has no resource_link, gets the text items alone.
func TestBlobsToFiles(t *testing.T) {
	t.Parallel()
	const size = 1000
	for _, proto := range []string{"", "2025-11-25", "2025-03-26"} {
		t.Run(cmp.Or(proto, "sdk default"), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := writeConfig(t, "blobs: {dir: "+q(dir)+"}\n", fixtureServer("fx", []string{"-no-weird"}))
			cs, _ := sdkStdioProxy(t, cfg, nil, &mcp.ClientSessionOptions{ProtocolVersion: proto})
			if got := cs.InitializeResult().ProtocolVersion; proto != "" && got != proto {
				t.Fatalf("negotiated %s, want %s", got, proto)
			}
			res := callTool(t, cs, "fx__blob", map[string]any{"count": 2, "bytes": size})

			links := proto == "" || proto >= "2025-06-18"
			perBlob := 1
			if links {
				perBlob = 2
			}
			if len(res.Content) != 2*perBlob {
				t.Fatalf("%d content items, want %d: %s", len(res.Content), 2*perBlob, jsonOf(t, res.Content))
			}
			for k := range 2 {
				want := fixtureBlob(k, size)
				sum := sha256.Sum256(want)
				path := filepath.Join(dir, "default", hex.EncodeToString(sum[:])+".bin")
				text, ok := res.Content[k*perBlob].(*mcp.TextContent)
				if !ok {
					t.Fatalf("item %d: %T, want text: %s", k*perBlob, res.Content[k*perBlob], jsonOf(t, res.Content))
				}
				if wantText := fmt.Sprintf("[Document: blob.bin] %s", path); text.Text != wantText {
					t.Errorf("blob %d: text %q, want %q", k, text.Text, wantText)
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Errorf("blob %d: %v", k, err)
				} else if !bytes.Equal(got, want) {
					t.Errorf("blob %d: the file holds %d bytes that differ from the %d decoded ones", k, len(got), len(want))
				}
				if !links {
					continue
				}
				link, ok := res.Content[k*perBlob+1].(*mcp.ResourceLink)
				if !ok {
					t.Fatalf("item %d: %T, want resource_link: %s", k*perBlob+1, res.Content[k*perBlob+1], jsonOf(t, res.Content))
				}
				if link.URI != "file://"+path || link.Name != "blob.bin" || link.MIMEType != "application/octet-stream" ||
					link.Size == nil || *link.Size != size {
					t.Errorf("blob %d: resource_link %s, want file://%s, blob.bin, application/octet-stream, size %d", k, jsonOf(t, link), path, size)
				}
			}
			entries, err := os.ReadDir(filepath.Join(dir, "default"))
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 2 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("blobs dir holds %v, want the two blob files only", names)
			}
		})
	}
}
