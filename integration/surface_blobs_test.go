package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sfBlobFile is the file name of content under its extension: <sha256>[.ext].
func sfBlobFile(content []byte, ext string) string {
	sum := sha256.Sum256(content)
	name := hex.EncodeToString(sum[:])
	if ext != "" {
		name += "." + ext
	}
	return name
}

// sfBlobWant is what one blob item must become.
type sfBlobWant struct {
	unavailable string // the whole "[attachment unavailable: …]" text, or "" for a file
	name        string // display name
	ext         string
	content     []byte
}

// sfCheckBlobResult checks the content a client received for a blob call:
// per blob, `[Document: <name>] <path>` then a resource_link to the file, or
// the one unavailable text item; and that each file holds its bytes.
func sfCheckBlobResult(t testing.TB, res *mcp.CallToolResult, agentDir string, wants []sfBlobWant) {
	t.Helper()
	if res.IsError {
		t.Fatalf("blob call: isError %s", contentText(res))
	}
	i := 0
	next := func() mcp.Content {
		if i >= len(res.Content) {
			t.Fatalf("the result ends after %d items, want more: %s", i, tail(jsonOf(t, res.Content), 2000))
		}
		i++
		return res.Content[i-1]
	}
	for k, w := range wants {
		item := next()
		text, ok := item.(*mcp.TextContent)
		if !ok {
			t.Fatalf("blob %d: item %T, want text: %s", k, item, tail(jsonOf(t, item), 300))
		}
		if w.unavailable != "" {
			if text.Text != w.unavailable {
				t.Errorf("blob %d: %q, want %q", k, text.Text, w.unavailable)
			}
			continue
		}
		path := filepath.Join(agentDir, sfBlobFile(w.content, w.ext))
		if want := "[Document: " + w.name + "] " + path; text.Text != want {
			t.Errorf("blob %d: %q, want %q", k, text.Text, want)
		}
		link, ok := next().(*mcp.ResourceLink)
		if !ok {
			t.Fatalf("blob %d: no resource_link after its text: %s", k, tail(jsonOf(t, res.Content), 2000))
		}
		if link.URI != "file://"+path || link.Name != w.name || link.MIMEType != "application/octet-stream" ||
			link.Size == nil || *link.Size != int64(len(w.content)) {
			t.Errorf("blob %d: resource_link %s, want file://%s, name %q, application/octet-stream, size %d",
				k, jsonOf(t, link), path, w.name, len(w.content))
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("blob %d: %v", k, err)
		} else if !bytes.Equal(got, w.content) {
			t.Errorf("blob %d: %s holds %d bytes that differ from the %d decoded ones", k, path, len(got), len(w.content))
		}
	}
	if i != len(res.Content) {
		t.Errorf("the result has %d items, want %d: %s", len(res.Content), i, tail(jsonOf(t, res.Content), 2000))
	}
}

// sfDirFiles returns the names in dir (none when it does not exist).
func sfDirFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// sfBlobAgents are the agents of TestSurfaceBlobs, one per case, so that
// each case owns the directory <blobs.dir>/<agent>.
var sfBlobAgents = []string{"one", "max64", "over65", "budget", "invalid", "zero", "names", "same", "linked"}

// TestSurfaceBlobs: the fixture's blob tool through an HTTP proxy in the
// default blobs mode (file), one agent (and so one directory) per case.
// Every outcome is checked on disk byte for byte and in what the client
// receives; at the end no file exists outside the agents' directories and
// no temporary file is left.
func TestSurfaceBlobs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "blobs")
	elsewhere := filepath.Join(root, "elsewhere")
	for _, d := range []string{dir, elsewhere} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The agent "linked" finds its directory replaced by a symbolic link.
	if err := os.Symlink(elsewhere, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	var top strings.Builder
	// Each case connects to its agent's own path, /agents/<a>/mcp.
	fmt.Fprintf(&top, "blobs: {dir: %s}\nbundles: {all: {servers: [fx]}}\ndefault_agent: one\nagents:\n", q(dir))
	for _, a := range sfBlobAgents {
		fmt.Fprintf(&top, "  %s: {mcp_bundles: [all]}\n", a)
	}
	cfg := writeConfig(t, top.String(), fixtureServer("fx", []string{"-no-weird"}))
	url, _ := startHTTPProxy(t, cfg)
	base := strings.TrimSuffix(url, "/mcp")
	connect := func(t *testing.T, agent string) *mcp.ClientSession {
		return sdkHTTP(t, base+"/agents/"+agent+"/mcp", nil, nil)
	}
	t.Run("one", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, "one")
		res := callTool(t, cs, "fx__blob", map[string]any{"count": 1, "bytes": 1000})
		content := fixtureBlob(0, 1000)
		sfCheckBlobResult(t, res, filepath.Join(dir, "one"), []sfBlobWant{{name: "blob.bin", ext: "bin", content: content}})
		if got, want := sfDirFiles(t, filepath.Join(dir, "one")), []string{sfBlobFile(content, "bin")}; !slices.Equal(got, want) {
			t.Errorf("agent dir holds %v, want %v", got, want)
		}
	})

	t.Run("64 blobs", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, "max64")
		res := callTool(t, cs, "fx__blob", map[string]any{"count": 64, "bytes": 100})
		var wants []sfBlobWant
		var files []string
		for k := range 64 {
			c := fixtureBlob(k, 100)
			wants = append(wants, sfBlobWant{name: "blob.bin", ext: "bin", content: c})
			files = append(files, sfBlobFile(c, "bin"))
		}
		sfCheckBlobResult(t, res, filepath.Join(dir, "max64"), wants)
		slices.Sort(files)
		if got := sfDirFiles(t, filepath.Join(dir, "max64")); !slices.Equal(got, files) {
			t.Errorf("agent dir holds %d files, want the 64 distinct blobs", len(got))
		}
	})

	t.Run("65 blobs", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, "over65")
		res := callTool(t, cs, "fx__blob", map[string]any{"count": 65, "bytes": 100})
		wants := make([]sfBlobWant, 65)
		for k := range wants {
			wants[k].unavailable = "[attachment unavailable: 65 attachments in one result, over the limit of 64]"
		}
		sfCheckBlobResult(t, res, filepath.Join(dir, "over65"), wants)
		if got := sfDirFiles(t, filepath.Join(dir, "over65")); len(got) != 0 {
			t.Errorf("65 blobs wrote %v, want nothing", got)
		}
	})

	t.Run("over 10 MiB in total", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, "budget")
		const each = 5<<20 + 1 // 2 × each = 10 MiB + 2 bytes
		res := callTool(t, cs, "fx__blob", map[string]any{"count": 2, "bytes": each})
		text := fmt.Sprintf("[attachment unavailable: attachments total about %d bytes, over the limit of %d bytes per result]", 2*each, 10<<20)
		sfCheckBlobResult(t, res, filepath.Join(dir, "budget"), []sfBlobWant{{unavailable: text}, {unavailable: text}})
		if got := sfDirFiles(t, filepath.Join(dir, "budget")); len(got) != 0 {
			t.Errorf("an over-budget result wrote %v, want nothing", got)
		}
	})

	t.Run("one invalid base64", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, "invalid")
		res := callTool(t, cs, "fx__blob", map[string]any{"count": 3, "bytes": 500, "invalid_index": 1})
		c0, c2 := fixtureBlob(0, 500), fixtureBlob(2, 500)
		sfCheckBlobResult(t, res, filepath.Join(dir, "invalid"), []sfBlobWant{
			{name: "blob.bin", ext: "bin", content: c0},
			{unavailable: "[attachment unavailable: invalid base64 data]"},
			{name: "blob.bin", ext: "bin", content: c2},
		})
		want := []string{sfBlobFile(c0, "bin"), sfBlobFile(c2, "bin")}
		slices.Sort(want)
		if got := sfDirFiles(t, filepath.Join(dir, "invalid")); !slices.Equal(got, want) {
			t.Errorf("agent dir holds %v, want the two valid blobs %v", got, want)
		}
	})

	t.Run("zero bytes", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, "zero")
		res := callTool(t, cs, "fx__blob", map[string]any{"count": 1, "bytes": 0})
		sfCheckBlobResult(t, res, filepath.Join(dir, "zero"), []sfBlobWant{{name: "blob.bin", ext: "bin", content: []byte{}}})
		if got, want := sfDirFiles(t, filepath.Join(dir, "zero")), []string{sfBlobFile(nil, "bin")}; !slices.Equal(got, want) {
			t.Errorf("agent dir holds %v, want %v", got, want)
		}
	})

	t.Run("hostile names", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, "names")
		content := fixtureBlob(0, 64)
		cases := []struct{ name, display, ext string }{
			{"../../etc/passwd", "passwd", ""},
			{"..%2f..%2fescape.bin", "______escape.bin", "bin"},
			{"..", "__", ""},
			{"dir/sub/Report.PDF", "Report.PDF", "pdf"},
			{"a\x00b.bin", "a_b.bin", "bin"},
			{"ctl\x01\x1b[31m.txt", "ctl__[31m.txt", "txt"},
			{"tab\there\u202e.bin", "tab_here_.bin", "bin"},
			{"", "upload.bin", "bin"},
		}
		files := map[string]bool{}
		for _, c := range cases {
			res := callTool(t, cs, "fx__blob", map[string]any{"count": 1, "bytes": 64, "name": c.name})
			sfCheckBlobResult(t, res, filepath.Join(dir, "names"), []sfBlobWant{{name: c.display, ext: c.ext, content: content}})
			files[sfBlobFile(content, c.ext)] = true
		}
		var want []string
		for f := range files {
			want = append(want, f)
		}
		slices.Sort(want)
		if got := sfDirFiles(t, filepath.Join(dir, "names")); !slices.Equal(got, want) {
			t.Errorf("agent dir holds %v, want %v", got, want)
		}
	})

	t.Run("same content twice", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, "same")
		content := fixtureBlob(0, 300)
		for range 2 {
			res := callTool(t, cs, "fx__blob", map[string]any{"count": 1, "bytes": 300})
			sfCheckBlobResult(t, res, filepath.Join(dir, "same"), []sfBlobWant{{name: "blob.bin", ext: "bin", content: content}})
		}
		// The same content under another name with the same extension: the same file.
		res := callTool(t, cs, "fx__blob", map[string]any{"count": 1, "bytes": 300, "name": "again.bin"})
		sfCheckBlobResult(t, res, filepath.Join(dir, "same"), []sfBlobWant{{name: "again.bin", ext: "bin", content: content}})
		if got, want := sfDirFiles(t, filepath.Join(dir, "same")), []string{sfBlobFile(content, "bin")}; !slices.Equal(got, want) {
			t.Errorf("the same content three times left %v, want the one file %v", got, want)
		}
	})

	t.Run("symlinked agent dir", func(t *testing.T) {
		t.Parallel()
		cs := connect(t, "linked")
		res := callTool(t, cs, "fx__blob", map[string]any{"count": 2, "bytes": 100})
		text := "[attachment unavailable: the file could not be stored]"
		sfCheckBlobResult(t, res, filepath.Join(dir, "linked"), []sfBlobWant{{unavailable: text}, {unavailable: text}})
		if got := sfDirFiles(t, elsewhere); len(got) != 0 {
			t.Errorf("the symlinked agent dir's target got %v, want nothing", got)
		}
	})

	t.Cleanup(func() {
		// Runs after the parallel subtests: every file is a blob file in an
		// agent's own directory, none is a leftover temporary file.
		name := regexp.MustCompile(`^[0-9a-f]{64}(\.[a-z0-9]{1,16})?$`)
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			parts := strings.Split(rel, string(filepath.Separator))
			if len(parts) != 2 || !slices.Contains(sfBlobAgents, parts[0]) || !name.MatchString(parts[1]) {
				t.Errorf("unexpected file %s", path)
			}
			return nil
		})
	})
}

// TestSurfaceBlobsSymlinkedDir: a blobs.dir that is a symbolic link is
// refused: the blobs become unavailable and nothing is written through it.
func TestSurfaceBlobsSymlinkedDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	target := filepath.Join(root, "real")
	link := filepath.Join(root, "blobs")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "blobs: {dir: "+q(link)+"}\n", fixtureServer("fx", []string{"-no-weird"}))
	cs := sfStdioProxy(t, cfg, nil, nil).cs
	res := callTool(t, cs, "fx__blob", map[string]any{"count": 2, "bytes": 100})
	text := "[attachment unavailable: the file could not be stored]"
	sfCheckBlobResult(t, res, filepath.Join(link, "default"), []sfBlobWant{{unavailable: text}, {unavailable: text}})
	if got := sfDirFiles(t, target); len(got) != 0 {
		t.Errorf("the symlinked blobs dir's target got %v, want nothing", got)
	}
}

// TestSurfaceBlobTenMiB measures what materializing one 10 MiB blob (the
// largest allowed) costs the proxy: the call's time and the growth of its
// peak memory, against the same call in passthrough mode.
func TestSurfaceBlobTenMiB(t *testing.T) {
	t.Parallel()
	const size = 10 << 20
	dir := t.TempDir()
	content := fixtureBlob(0, size)
	for _, mode := range []string{"file", "passthrough"} {
		t.Run(mode, func(t *testing.T) {
			cfg := writeConfig(t, fmt.Sprintf("blobs: {dir: %s, mode: %s}\n", q(dir), mode), fixtureServer("fx", []string{"-no-weird"}))
			p := sfStdioProxy(t, cfg, nil, nil)
			callTool(t, p.cs, "fx__blob", map[string]any{"count": 1, "bytes": 16}) // warm up
			hwm0, _ := sfMem(t, p.pid)
			start := time.Now()
			res := callTool(t, p.cs, "fx__blob", map[string]any{"count": 1, "bytes": size})
			took := time.Since(start)
			hwm1, _ := sfMem(t, p.pid)
			if mode == "file" {
				sfCheckBlobResult(t, res, filepath.Join(dir, "default"), []sfBlobWant{{name: "blob.bin", ext: "bin", content: content}})
			} else if len(res.Content) != 1 {
				t.Errorf("passthrough: %d items, want the embedded resource", len(res.Content))
			} else if r, ok := res.Content[0].(*mcp.EmbeddedResource); !ok || r.Resource == nil || !bytes.Equal(r.Resource.Blob, content) {
				t.Errorf("passthrough: the embedded blob did not come through intact")
			}
			t.Logf("FIGURES 10 MiB blob, mode %s (%s): call %s, proxy VmHWM %d -> %d KiB (+%d KiB)",
				mode, sfBuild(), took.Round(time.Millisecond), hwm0, hwm1, hwm1-hwm0)
		})
	}
}
