package blobs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestStorePut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	st, err := openStore(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	data := []byte("0123456789")

	// Over the limit while decoding: ErrTooLarge, nothing left behind.
	if _, err := st.put(bytes.NewReader(data), "txt", 9); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("put over limit: %v", err)
	}
	// A failing source: its error, nothing left behind.
	boom := errors.New("boom")
	if _, err := st.put(iotest.ErrReader(boom), "txt", 100); !errors.Is(err, boom) {
		t.Fatalf("put failing reader: %v", err)
	}
	if tree := treeOf(t, dir); !reflect.DeepEqual(tree, []string{"a"}) {
		t.Fatalf("left behind: %v", tree)
	}

	res, err := st.put(bytes.NewReader(data), "txt", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := putResult{path: filepath.Join(dir, "a", shaName(data, "txt")), size: 10}
	if res != want {
		t.Fatalf("put = %+v, want %+v", res, want)
	}
	res, err = st.put(bytes.NewReader(data), "txt", 10)
	if err != nil || !res.reused {
		t.Fatalf("second put = %+v, %v; want reused", res, err)
	}
	res, err = st.put(bytes.NewReader(data), "", 10)
	if err != nil || res.reused || filepath.Base(res.path) != shaName(data, "") {
		t.Fatalf("put without ext = %+v, %v", res, err)
	}
}

func TestOpenStoreRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, parent string)
		want  error
	}{
		{"dir is a file", func(t *testing.T, parent string) {
			if err := os.WriteFile(filepath.Join(parent, "blobs"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrNotRegular},
		{"dir is a symlink", func(t *testing.T, parent string) {
			mustMkdir(t, filepath.Join(parent, "real"))
			mustSymlink(t, "real", filepath.Join(parent, "blobs"))
		}, ErrSymlink},
		{"agent is a symlink", func(t *testing.T, parent string) {
			mustMkdir(t, filepath.Join(parent, "real"))
			mustSymlink(t, filepath.Join(parent, "real"), filepath.Join(parent, "blobs", "a"))
		}, ErrSymlink},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			tc.setup(t, parent)
			st, err := openStore(filepath.Join(parent, "blobs"), "a")
			if !errors.Is(err, tc.want) {
				if st != nil {
					t.Error(st.Close())
				}
				t.Fatalf("openStore: %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), parent) {
				t.Fatalf("error %q does not name the path", err)
			}
		})
	}
}

func TestLimitWriter(t *testing.T) {
	var buf bytes.Buffer
	lw := &limitWriter{w: &buf, max: 5}
	if n, err := io.WriteString(lw, "abc"); n != 3 || err != nil {
		t.Fatalf("first write: %d %v", n, err)
	}
	if n, err := io.WriteString(lw, "de"); n != 2 || err != nil {
		t.Fatalf("write up to the limit: %d %v", n, err)
	}
	if _, err := io.WriteString(lw, "f"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("write over the limit: %v", err)
	}
	if buf.String() != "abcde" {
		t.Fatalf("wrote %q", buf.String())
	}
}
