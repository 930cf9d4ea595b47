package integration

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestBlobStoreBounded is issue 12, item 10: with blobs.max_bytes set, each
// new blob file evicts the oldest of its agent's folder until the folder fits,
// a blob that cannot fit becomes "[attachment unavailable: blob store full]",
// and mcp_proxy_blob_store_bytes{agent} follows the folder. A file the proxy
// did not write stays.
func TestBlobStoreBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agentDir := filepath.Join(dir, "default")
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agentDir, "keep.txt"), []byte("not a blob"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "blobs: {dir: "+q(dir)+", max_bytes: 5000}\nmetrics: {listen: 127.0.0.1:0}\n", fixtureServer("fx", []string{"-no-weird"}))
	cs, stderr := sdkStdioProxy(t, cfg, nil, nil)
	metricsURL := sfMetricsURL(t, stderr)

	fileOf := func(n int) string {
		sum := sha256.Sum256(fixtureBlob(0, n))
		return filepath.Join(agentDir, hex.EncodeToString(sum[:])+".bin")
	}
	for _, n := range []int{2000, 2001, 2002} {
		res := callTool(t, cs, "fx__blob", map[string]any{"count": 1, "bytes": n})
		if text := res.Content[0].(*mcp.TextContent).Text; text != "[Document: blob.bin] "+fileOf(n) {
			t.Fatalf("blob of %d bytes: %q", n, text)
		}
	}
	// 2000+2001+2002 > 5000: the first file went when the third came.
	if _, err := os.Stat(fileOf(2000)); err == nil {
		t.Errorf("the oldest blob file is still there; the folder is over blobs.max_bytes")
	}
	for _, n := range []int{2001, 2002} {
		if _, err := os.Stat(fileOf(n)); err != nil {
			t.Errorf("blob of %d bytes: %v", n, err)
		}
	}
	if got := sfMetric(t, metricsURL, "mcp_proxy_blob_store_bytes", `agent="default"`); got != 4003 {
		t.Errorf("mcp_proxy_blob_store_bytes{agent=\"default\"} = %v, want 4003", got)
	}

	res := callTool(t, cs, "fx__blob", map[string]any{"count": 1, "bytes": 6000})
	if text := res.Content[0].(*mcp.TextContent).Text; text != "[attachment unavailable: blob store full]" {
		t.Errorf("blob over the whole budget: %q", text)
	}
	if _, err := os.Stat(fileOf(6000)); err == nil {
		t.Errorf("the blob over budget was written")
	}
	if got, err := os.ReadFile(filepath.Join(agentDir, "keep.txt")); err != nil || string(got) != "not a blob" {
		t.Errorf("a file the proxy did not write was touched: %q, %v", got, err)
	}
}

// TestBlobsInStructuredContent: server-filesystem's read_media_file returns
// the file both as a content item and in structuredContent. Through the
// proxy, the copy in structuredContent becomes the same reference text as
// the content item (a string still, so the client's check against the tool's
// outputSchema passes), and no base64 of the file reaches the client: a PNG
// (image item, with materialize_media) and a binary file (resource blob, by
// default).
func TestBlobsInStructuredContent(t *testing.T) {
	t.Parallel()
	files := t.TempDir()
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0xfb, 0xff, 0x00, 0x7f}, 600)...)
	bin := bytes.Repeat([]byte("mcp-proxy blob \xfe\xff"), 300)
	for name, data := range map[string][]byte{"pixel.png": png, "data.bin": bin} {
		if err := os.WriteFile(filepath.Join(files, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, media := range []bool{true, false} {
		t.Run(fmt.Sprintf("materialize_media=%v", media), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := writeConfig(t, fmt.Sprintf("blobs: {dir: %s, materialize_media: %v}\n", q(dir), media), filesystemServer("fs", files))
			cs, _ := sdkStdioProxy(t, cfg, nil, nil)
			for _, c := range []struct {
				file string
				data []byte
				ext  string
				ref  func(path string) string
				skip bool // an image item passes unchanged without materialize_media
			}{
				{"pixel.png", png, "png", func(p string) string { return "[IMAGE:" + p + "]" }, !media},
				{"data.bin", bin, "bin", func(p string) string { return "[Document: data.bin] " + p }, false},
			} {
				res := callTool(t, cs, "fs__read_media_file", map[string]any{"path": filepath.Join(files, c.file)})
				raw := jsonOf(t, res)
				b64 := base64.StdEncoding.EncodeToString(c.data)
				if c.skip {
					if !strings.Contains(structured(t, res), b64) {
						t.Errorf("%s: passed through, structuredContent should keep the data: %.300s", c.file, raw)
					}
					continue
				}
				sum := sha256.Sum256(c.data)
				path := filepath.Join(dir, "default", hex.EncodeToString(sum[:])+"."+c.ext)
				want := c.ref(path)
				if strings.Contains(raw, b64[:64]) {
					t.Errorf("%s: base64 of the file reached the client: %.400s", c.file, raw)
				}
				text, ok := res.Content[0].(*mcp.TextContent)
				if !ok || text.Text != want {
					t.Errorf("%s: first item %s, want text %q", c.file, jsonOf(t, res.Content[0]), want)
				}
				var sc struct {
					Content []map[string]any `json:"content"`
				}
				if err := json.Unmarshal([]byte(structured(t, res)), &sc); err != nil || len(sc.Content) != 1 {
					t.Fatalf("%s: structuredContent %s: %v", c.file, structured(t, res), err)
				}
				key := "blob"
				item := sc.Content[0]
				if inner, ok := item["resource"].(map[string]any); ok {
					item = inner
				} else {
					key = "data"
				}
				if item[key] != want {
					t.Errorf("%s: structuredContent %s = %v, want %q", c.file, key, item[key], want)
				}
				if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, c.data) {
					t.Errorf("%s: file %s: %v", c.file, path, err)
				}
			}
		})
	}
}
