package integration

import (
	"cmp"
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSubscriptionsAcrossEras: a resource subscription through the proxy
// over Streamable HTTP, from a go-sdk client of each protocol era to the
// official Go SDK's conformance everything-server spoken to in each era
// (protocol pinned to 2025-11-25, then to 2026-07-28). A 2025-11-25
// client's resources/subscribe and a 2026-07-28 client's
// subscriptions/listen reach a session-era server as resources/subscribe
// (its updates come on its stream) and a 2026-07-28 server as its own
// subscriptions/listen; either way the server's updates of
// test://watched-resource come back to the client, in its era's form.
func TestSubscriptionsAcrossEras(t *testing.T) {
	t.Parallel()
	bin := everythingGoBin(t)
	for _, upstreamEra := range []string{"2025-11-25", "2026-07-28"} {
		t.Run("upstream "+upstreamEra, func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, "", stdioServer("sdk", bin, nil, "protocol: "+q(upstreamEra), "env: {HOME: "+q(t.TempDir())+"}"))
			url, _ := startHTTPProxy(t, cfg)
			for _, clientEra := range []string{"2025-11-25", ""} {
				t.Run("client "+cmp.Or(clientEra, "2026-07-28"), func(t *testing.T) {
					updated := make(chan string, 16)
					cs := sdkHTTP(t, url, &mcp.ClientOptions{
						ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
							select {
							case updated <- r.Params.URI:
							default:
							}
						},
					}, &mcp.ClientSessionOptions{ProtocolVersion: clientEra})
					if want := cmp.Or(clientEra, "2026-07-28"); cs.InitializeResult().ProtocolVersion != want {
						t.Fatalf("the client speaks %s, want %s", cs.InitializeResult().ProtocolVersion, want)
					}
					const uri = "sdk+test://watched-resource"
					ctx := testCtx(t, callTimeout)
					if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
						t.Fatalf("subscribe %s: %v", uri, err)
					}
					select {
					case got := <-updated:
						if got != uri {
							t.Errorf("update for %q, want %q", got, uri)
						}
					case <-time.After(20 * time.Second):
						t.Fatalf("no notifications/resources/updated for %s within 20 s", uri)
					}
					if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
						t.Errorf("unsubscribe: %v", err)
					}
				})
			}
		})
	}
}
