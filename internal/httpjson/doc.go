// Package httpjson fetches one JSON document over HTTP: a GET with
// "Accept: application/json", a bounded body, and a decode into the
// caller's value. The OAuth code on both sides of the proxy uses it: the
// client side (oauthclient) for protected resource and authorization
// server metadata, the resource server side (authn) for an issuer's
// metadata and key set.
//
// It leaves to the caller what differs between them: the timeout (the
// context's deadline and the http.Client's), which statuses mean "try the
// next URL", and how an error names the URL (an *Error never names it, nor
// repeats any of the body).
package httpjson
