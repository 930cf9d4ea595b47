package seal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
	"time"
)

var now = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

func TestSealOpen(t *testing.T) {
	s := Random()
	msg := []byte(`{"server":"fx","round":1}`)
	tok := s.Seal("state", msg, now.Add(time.Minute))
	if bytes.Contains([]byte(tok), []byte("fx")) {
		t.Errorf("token %q shows its message", tok)
	}
	got, err := s.Open("state", tok, now)
	if err != nil || string(got) != string(msg) {
		t.Fatalf("Open = %q, %v; want %q", got, err, msg)
	}
	if again := s.Seal("state", msg, now.Add(time.Minute)); again == tok {
		t.Error("sealing the same message twice gave the same token")
	}

	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	flipped := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for _, tc := range []struct {
		name, purpose, token string
		at                   time.Time
		sealer               *Sealer
		want                 error
	}{
		{"expired", "state", tok, now.Add(time.Minute), s, ErrExpired},
		{"other purpose", "approval", tok, now, s, ErrInvalid},
		{"other key", "state", tok, now, Random(), ErrInvalid},
		{"version byte", "state", flipped(0), now, s, ErrInvalid},
		{"nonce", "state", flipped(3), now, s, ErrInvalid},
		{"ciphertext", "state", flipped(len(raw) / 2), now, s, ErrInvalid},
		{"tag", "state", flipped(len(raw) - 1), now, s, ErrInvalid},
		{"truncated", "state", tok[:len(tok)-4], now, s, ErrInvalid},
		{"not base64url", "state", "px-park-" + tok, now, s, ErrInvalid},
		{"empty", "state", "", now, s, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.sealer.Open(tc.purpose, tc.token, tc.at); !errors.Is(err, tc.want) {
				t.Errorf("Open = %v; want %v", err, tc.want)
			}
		})
	}
}

// Processes given the same secret open each other's tokens; another secret
// does not.
func TestFromSecret(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	a, err := FromSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := FromSecret(append([]byte(nil), secret...))
	c, _ := FromSecret([]byte("another secret of thirty-two b.."))
	tok := a.Seal("state", []byte("m"), now.Add(time.Second))
	if got, err := b.Open("state", tok, now); err != nil || string(got) != "m" {
		t.Errorf("same secret: %q, %v", got, err)
	}
	if _, err := c.Open("state", tok, now); !errors.Is(err, ErrInvalid) {
		t.Errorf("other secret: %v; want ErrInvalid", err)
	}
	if _, err := FromSecret(nil); err == nil {
		t.Error("an empty secret was taken")
	}
	if _, err := New(make([]byte, 16)); err == nil {
		t.Error("a 16-byte key was taken")
	}
}

// Open reads what clients send: it never panics, and whatever it accepts
// is exactly a message some Seal made.
func FuzzOpen(f *testing.F) {
	s, _ := New(bytes.Repeat([]byte{7}, KeySize))
	f.Add(s.Seal("state", []byte(`{"a":1}`), now.Add(time.Hour)))
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, token string) {
		msg, err := s.Open("state", token, now)
		if err == nil && len(msg) > len(token) {
			t.Fatalf("opened %q into a message longer than the token", token)
		}
	})
}
