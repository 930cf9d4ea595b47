// Package scaleout tests mcp-proxy scaled out: two replicas behind nginx
// with deploy/nginx/mcp-proxy.conf, sessions pinned to the replica that
// created them, and one replica killed while sessions are open. The test
// needs nginx, so it is built only with the build tag nginx:
//
//	go test -race -count=1 -tags nginx ./integration/scaleout/
//
// (.ci/run installs Debian's nginx-light and runs it after the README's test
// command). Without nginx that command fails and says so; without the tag
// only the tests that need no nginx (the site template, the nginx lookup)
// run. With the build tag redis instead, three replicas sharing a real
// redis-server (docs/shared-state.md) run behind
// deploy/nginx/mcp-proxy-redis.conf, round robin without affinity:
//
//	go test -race -count=1 -tags redis ./integration/scaleout/
//
// Everything runs on 127.0.0.1, and every process the test starts is
// stopped before it ends.
package scaleout
