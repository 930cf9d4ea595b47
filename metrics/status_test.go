package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestStatusSignIn: each token entered on the status page is counted by
// its result; a nil *Metrics records nothing.
func TestStatusSignIn(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.StatusSignIn("wrong_token")
	m.StatusSignIn("wrong_token")
	m.StatusSignIn("throttled")
	m.StatusSignIn("ok")
	want := `
# HELP mcp_proxy_status_sign_ins_total Tokens entered on the status page (its form or its address), by result (ok, wrong_token, throttled: refused unchecked while too many wrong tokens came).
# TYPE mcp_proxy_status_sign_ins_total counter
mcp_proxy_status_sign_ins_total{result="ok"} 1
mcp_proxy_status_sign_ins_total{result="throttled"} 1
mcp_proxy_status_sign_ins_total{result="wrong_token"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcp_proxy_status_sign_ins_total"); err != nil {
		t.Error(err)
	}
	var none *Metrics
	none.StatusSignIn("ok")
}
