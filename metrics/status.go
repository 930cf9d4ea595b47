package metrics

// StatusSignIn counts one token entered on the status page; result is one
// of status.SignInOK, SignInWrongToken, SignInThrottled, never the token.
func (m *Metrics) StatusSignIn(result string) { m.count(statusSignIns, result) }
