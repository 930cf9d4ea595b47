package httpguard

import (
	"net/http"
	"strconv"
)

// Rebinding serves r with next only when HostAllowed and OriginAllowed hold;
// otherwise it answers 403 naming the header that was refused.
func Rebinding(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !HostAllowed(r):
			http.Error(w, "Forbidden: invalid Host header "+strconv.Quote(r.Host), http.StatusForbidden)
		case !OriginAllowed(r):
			http.Error(w, "Forbidden: Origin "+strconv.Quote(r.Header.Get("Origin"))+" is not allowed", http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
