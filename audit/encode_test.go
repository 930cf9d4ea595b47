package audit

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// jsonLine is the layout of one audit line for encoding/json, the
// reference encode is held to.
type jsonLine struct {
	Time        string          `json:"time"`
	Agent       string          `json:"agent"`
	Session     string          `json:"session,omitempty"`
	Client      string          `json:"client"`
	Auth        string          `json:"auth"`
	TokenPos    int             `json:"token_position,omitempty"`
	Method      string          `json:"method"`
	Target      string          `json:"target"`
	Server      string          `json:"server,omitempty"`
	Decision    string          `json:"decision"`
	Rule        string          `json:"rule,omitempty"`
	Approval    string          `json:"approval,omitempty"`
	Outcome     string          `json:"outcome,omitempty"`
	Error       string          `json:"error,omitempty"`
	DurationMS  float64         `json:"duration_ms"`
	ArgsSHA256  string          `json:"arguments_sha256,omitempty"`
	Args        json.RawMessage `json:"arguments,omitempty"`
	ArgsOmitted string          `json:"arguments_omitted,omitempty"`
	RequestID   json.RawMessage `json:"request_id,omitempty"`
	TraceID     string          `json:"trace_id,omitempty"`
}

// encodeJSON is r's line as encoding/json writes it.
func encodeJSON(r *record) ([]byte, error) {
	l := jsonLine{Time: r.Time.UTC().Format(timeLayout), Agent: r.Agent, Session: r.Session, Client: r.Agent, Auth: AuthNone,
		Method: r.Method, Target: r.Target, Server: r.Server, Decision: r.Decision, Rule: r.Rule, Approval: r.Approval,
		Outcome: r.Outcome, Error: r.Error, DurationMS: float64(r.Duration.Microseconds()) / 1000,
		ArgsOmitted: r.argsOmitted, TraceID: r.TraceID}
	switch {
	case r.Subject != "":
		l.Client, l.Auth = r.Subject, AuthOAuth
	case r.Token > 0:
		l.Auth, l.TokenPos = AuthToken, r.Token
	}
	if r.hasDigest {
		l.ArgsSHA256 = hex.EncodeToString(r.digest[:])
	}
	if len(r.args) > 0 {
		l.Args = r.args
	}
	if validID(r.RequestID) {
		l.RequestID = r.RequestID
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&l); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// FuzzEncodeMatchesJSON: a line is byte for byte what encoding/json
// writes for the same entry (member order, left-out members, string
// escapes, numbers, compacted raw values).
func FuzzEncodeMatchesJSON(f *testing.F) {
	f.Add("assistant", "3f2a", "", 2, "github__create_issue", "github", "", "approve", "ok", "", int64(412345678),
		[]byte(`{"a": [1, 2]}`), []byte(`7`), "4bf92f3577b34da6a3ce929d0e0e4736", "full", int64(1764490502123456789))
	f.Add("a\u2028<b>&", "", "alice@example.com", 0, "files+file:///srv/a.txt?x=1", "", "not_granted", "", "", "boom \"\x01\x7f\xff",
		int64(0), []byte(nil), []byte(`"r-1"`), "", "digest", int64(0))
	f.Add("", "", "", -3, "\t\n\r\b\f\\", "", "", "", "timeout", "", int64(-1500), []byte(` "s" `), []byte(`-1e400`), "",
		"none", int64(-62135596800000000))
	f.Add("x", "", "", 1, "y", "z", "", "", "", "", int64(math.MaxInt64), []byte(`[`), []byte(` 7 `), "", "full", int64(math.MaxInt64))
	f.Add("x", "", "", 0, "y", "", "", "", "", "", int64(999), []byte(`{}`), []byte(`{"a":1}`), "", "full", int64(1))
	f.Fuzz(func(t *testing.T, agent, session, subject string, token int, target, server, rule, approval, outcome, errText string,
		dur int64, args, id []byte, traceID, mode string, unixNano int64) {
		r := &record{Entry: Entry{Time: time.Unix(0, unixNano), Agent: agent, Session: session, Subject: subject, Token: token,
			Method: "tools/call", Target: target, Server: server, Decision: DecisionAllow, Rule: rule, Approval: approval,
			Outcome: outcome, Error: errText, Duration: time.Duration(dur), RequestID: id, TraceID: traceID}}
		if mode != "none" && len(args) > 0 {
			r.digest, r.args, r.hasDigest = digestOf(args, mode == "full")
		}
		if mode == "full" && !r.hasDigest && len(args) > 0 {
			r.argsOmitted = "invalid JSON"
		}
		want, wantErr := encodeJSON(r)
		got, err := r.encode()
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("encode = %q, %v\nencoding/json: %q, %v", got, err, want, wantErr)
		}
	})
}

// TestAppendFloat: numbers as encoding/json writes them, the exponent
// forms included (a duration never needs them; the rule is kept whole).
func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.001, 412.345, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 1e20, 1e21, -1e21,
		123456789012345678901234.0, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFloat(nil, f); string(got) != string(want) {
			t.Errorf("appendFloat(%g) = %s, encoding/json writes %s", f, got, want)
		}
	}
}

// BenchmarkEncode writes the line of a typical call (digest mode, static
// token, trace id) with encoding/json, as encode did, and with encode.
func BenchmarkEncode(b *testing.B) {
	r := &record{Entry: Entry{Time: time.Now(), Agent: "assistant", Session: "mcp-proxy-5f0c1d2e", Token: 1,
		Method: "tools/call", Target: "github__create_issue", Server: "github", Decision: DecisionAllow,
		Outcome: "ok", Duration: 412345 * time.Microsecond, RequestID: json.RawMessage(`7`),
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}}
	r.digest, _, r.hasDigest = digestOf(json.RawMessage(`{"title":"a bug","body":"it breaks"}`), false)
	for _, c := range []struct {
		name string
		enc  func(*record) ([]byte, error)
	}{{"encoding_json", encodeJSON}, {"encode", (*record).encode}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.enc(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
