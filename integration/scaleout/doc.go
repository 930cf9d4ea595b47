// Package scaleout tests mcp-proxy scaled out: two replicas behind nginx
// with deploy/nginx/mcp-proxy.conf, sessions pinned to the replica that
// created them, and one replica killed while sessions are open. The test
// needs nginx (.ci/run installs Debian's nginx-light); without it the test
// fails and says so. Everything runs on 127.0.0.1, and every process the
// test starts is stopped before it ends.
package scaleout
