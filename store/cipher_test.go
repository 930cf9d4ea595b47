package store

import (
	"bytes"
	"errors"
	"testing"
)

func master(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// TestCipher: a value opens under the context it was sealed for, and under
// no other, with no other key, and not once changed; a second key reads
// what the first sealed while sealing under itself.
func TestCipher(t *testing.T) {
	c, err := NewCipher(master(1))
	if err != nil {
		t.Fatal(err)
	}
	sealed := c.Seal([]byte("refresh-token-123"), "mcp-proxy:token:github")
	if bytes.Contains(sealed, []byte("refresh-token-123")) {
		t.Fatal("sealed value holds the plaintext")
	}
	if got, err := c.Open(sealed, "mcp-proxy:token:github"); err != nil || string(got) != "refresh-token-123" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if again := c.Seal([]byte("refresh-token-123"), "mcp-proxy:token:github"); bytes.Equal(again, sealed) {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
	other, _ := NewCipher(master(2))
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1
	for name, tc := range map[string]struct {
		c       *Cipher
		sealed  []byte
		context string
	}{
		"other context": {c, sealed, "mcp-proxy:token:gitlab"},
		"other key":     {other, sealed, "mcp-proxy:token:github"},
		"tampered":      {c, tampered, "mcp-proxy:token:github"},
		"short":         {c, sealed[:10], "mcp-proxy:token:github"},
		"empty":         {c, nil, "mcp-proxy:token:github"},
		"version":       {c, append([]byte{9}, sealed[1:]...), "mcp-proxy:token:github"},
	} {
		if got, err := tc.c.Open(tc.sealed, tc.context); !errors.Is(err, ErrSealed) || got != nil {
			t.Errorf("%s: Open = %q, %v; want ErrSealed", name, got, err)
		}
	}

	rotated, err := NewCipher(master(2), master(1))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(sealed, "mcp-proxy:token:github"); err != nil || string(got) != "refresh-token-123" {
		t.Fatalf("the new cipher does not read the old key's value: %q, %v", got, err)
	}
	fresh := rotated.Seal([]byte("v"), "k")
	if _, err := c.Open(fresh, "k"); !errors.Is(err, ErrSealed) {
		t.Errorf("a value sealed after rotation opens under the old key alone: %v", err)
	}
	if got, err := other.Open(fresh, "k"); err != nil || string(got) != "v" {
		t.Errorf("a value sealed after rotation is not under the new key: %q, %v", got, err)
	}
}

// FuzzCipherOpen: Open never panics on any input and never opens what Seal
// did not produce.
func FuzzCipherOpen(f *testing.F) {
	c, err := NewCipher(master(1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(c.Seal([]byte("x"), "k"))
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, err := c.Open(b, "other"); err == nil {
			t.Fatalf("opened %q under a context it was not sealed for", got)
		}
	})
}
