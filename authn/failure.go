package authn

import (
	"net/http"
	"strings"
)

// Failure is a refused request: the exact answer to send. Status is 401,
// 403, 404 or 503; Header holds WWW-Authenticate where the status calls
// for one; Message is a one-line text for the body that names no token,
// claim value or subject. Result is the outcome counted in
// mcp_proxy_auth_total ("" for a 404, which is not counted).
type Failure struct {
	Status  int
	Header  http.Header
	Message string
	Result  string
}

// Error returns Message.
func (f *Failure) Error() string { return f.Message }

// Write sends the failure: its headers, the status and Message as a plain
// text body.
func (f *Failure) Write(w http.ResponseWriter) {
	for k, vs := range f.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	http.Error(w, f.Message, f.Status)
}

// descriptions are the error_description of each refused token (RFC 6750
// §3): fixed texts, so nothing from the token reaches the client's logs.
var descriptions = map[string]string{
	ResultInvalid:           "The access token is invalid",
	ResultExpired:           "The access token expired",
	ResultWrongAudience:     "The access token is for another resource",
	ResultInsufficientScope: "The access token lacks a required scope",
}

// fail builds the 401, 403 insufficient_scope or 503 of an endpoint under
// listen.auth and counts it. pathAgent "" is the default endpoint.
func (a *Authenticator) fail(pathAgent, result string) *Failure {
	a.count(pathAgent, result)
	f := &Failure{Header: http.Header{}, Result: result}
	switch result {
	case ResultUnavailable:
		f.Status = http.StatusServiceUnavailable
		f.Header.Set("Retry-After", "10")
		f.Message = "Service Unavailable: the authorization server cannot be reached to check the token"
		return f
	case ResultMissing:
		f.Status = http.StatusUnauthorized
		f.Message = "Unauthorized: a bearer token is required; WWW-Authenticate names the protected resource metadata"
		f.Header.Set("WWW-Authenticate", a.challenge(pathAgent, ""))
	case ResultInsufficientScope:
		f.Status = http.StatusForbidden
		f.Message = "Forbidden: the access token lacks a required scope (" + strings.Join(a.oauth.required, " ") + ")"
		f.Header.Set("WWW-Authenticate", a.challenge(pathAgent, "insufficient_scope", descriptions[result]))
	default:
		f.Status = http.StatusUnauthorized
		f.Message = "Unauthorized: " + strings.ToLower(descriptions[result][:1]) + descriptions[result][1:]
		f.Header.Set("WWW-Authenticate", a.challenge(pathAgent, "invalid_token", descriptions[result]))
	}
	return f
}

// forbidden builds a 403 for a valid credential that does not open the
// endpoint, and counts it. It carries no challenge: a new token from the
// same user would not help, and a client must not loop asking for one.
func (a *Authenticator) forbidden(label, result, msg string) *Failure {
	a.count(label, result)
	return &Failure{Status: http.StatusForbidden, Header: http.Header{}, Message: msg, Result: result}
}

// challenge is the WWW-Authenticate value of an endpoint (RFC 6750 §3,
// RFC 9728 §5.1): the endpoint's metadata URL, the required scopes, and
// the error with its description when a token was refused.
func (a *Authenticator) challenge(pathAgent, errCode string, description ...string) string {
	var b strings.Builder
	b.WriteString("Bearer ")
	if errCode != "" {
		b.WriteString(`error="` + errCode + `", `)
		for _, d := range description {
			b.WriteString(`error_description="` + d + `", `)
		}
	}
	if len(a.oauth.required) > 0 {
		b.WriteString(`scope="` + strings.Join(a.oauth.required, " ") + `", `)
	}
	b.WriteString(`resource_metadata="` + quotedText(a.MetadataURL(pathAgent)) + `"`)
	return b.String()
}

// quotedText escapes s for an HTTP quoted-string (RFC 9110 §5.6.4).
func quotedText(s string) string {
	if !strings.ContainsAny(s, `"\`) {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}
