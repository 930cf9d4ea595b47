package main

import (
	"fmt"
	"strconv"
)

// The upstreams the call scenarios run with: the ratios depend on the
// upstream's own cost, so they run with both.
const (
	// upFixture is the repo's fixture server (integration/fixture): a
	// hand-written JSON-RPC loop, cheap per call.
	upFixture = "fixture"
	// upGoSDK is the go-sdk echo server (sdkecho.go): a server as go-sdk
	// users write them, whose per-call cost is that library's.
	upGoSDK = "gosdk"
)

var upstreamNames = []string{upFixture, upGoSDK}

// upstreamCmd is how to run upstream u over stdio, its echo padded to
// payload bytes (0: not padded): the executable, its arguments and the
// role it runs as ("" for the fixture).
func (e *env) upstreamCmd(u string, payload int) (path string, args []string, role string, err error) {
	if payload > 0 {
		args = []string{"-payload-bytes", strconv.Itoa(payload)}
	}
	switch u {
	case upFixture:
		return e.o.fixture, args, "", nil
	case upGoSDK:
		self, err := selfPath()
		return self, args, roleSDKEcho, err
	}
	return "", nil, "", fmt.Errorf("unknown upstream %q", u)
}

// roleEnvOf is the environment that gives a process role ("" none).
func roleEnvOf(role string) []string {
	if role == "" {
		return nil
	}
	return []string{roleEnv + "=" + role}
}

// upstreamSpec runs upstream u over stdio (the direct side).
func (e *env) upstreamSpec(u string, payload int) (procSpec, error) {
	path, args, role, err := e.upstreamCmd(u, payload)
	return procSpec{name: u, path: path, args: args, stdio: true, env: roleEnvOf(role)}, err
}

// upstreamHTTPSpec runs upstream u serving Streamable HTTP on a loopback
// port; its ready value is the URL.
func (e *env) upstreamHTTPSpec(u string, payload int) (procSpec, error) {
	path, args, role, err := e.upstreamCmd(u, payload)
	return procSpec{name: u + " (http)", path: path, args: append(args, "-http", loopback+":0"),
		env: roleEnvOf(role), ready: fixtureURL}, err
}

// upstreamServer is upstream u as a stdio server of the proxy's config.
func (e *env) upstreamServer(u string, payload int) (serverConfig, error) {
	path, args, role, err := e.upstreamCmd(u, payload)
	sc := serverConfig{Command: path, Args: args}
	if role != "" {
		sc.Env = map[string]string{roleEnv: role}
	}
	return sc, err
}

// floorSpec runs role (roleRelay over stdio, roleBridge over HTTP) in front
// of upstream u.
func (e *env) floorSpec(role, u string, payload int) (procSpec, error) {
	self, err := selfPath()
	if err != nil {
		return procSpec{}, err
	}
	path, args, childRole, err := e.upstreamCmd(u, payload)
	if err != nil {
		return procSpec{}, err
	}
	spec := procSpec{name: role, path: self, args: append([]string{path}, args...),
		env: []string{roleEnv + "=" + role, childRoleEnv + "=" + childRole}}
	if role == roleBridge {
		spec.ready = fixtureURL
	} else {
		spec.stdio = true
	}
	return spec, nil
}
