// Package deploy holds the deployment examples of mcp-proxy: a systemd unit
// (systemd/), a Kubernetes manifest (kubernetes/), the container image it
// runs (Dockerfile), an nginx config that puts several replicas behind
// one address with session affinity (nginx/) and a Grafana dashboard
// (grafana/). The package has no code; its
// tests parse every example and check that the pieces agree with each other
// and with the proxy's own config rules. integration/scaleout runs the
// nginx config against real replicas.
package deploy
