package metrics

import "github.com/prometheus/client_golang/prometheus"

// newStatusSignIns is mcp_proxy_status_sign_ins_total{result}.
func newStatusSignIns() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcp_proxy_status_sign_ins_total",
		Help: "Tokens entered on the status page (its form or its address), by result (ok, wrong_token, throttled: refused unchecked while too many wrong tokens came).",
	}, []string{"result"})
}

// StatusSignIn counts one token entered on the status page; result is one
// of status.SignInOK, SignInWrongToken, SignInThrottled, never the token.
func (m *Metrics) StatusSignIn(result string) {
	if m == nil {
		return
	}
	m.statusSignIns.WithLabelValues(result).Inc()
}
