package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// roleEnv, set in a process's environment, makes this binary (or its test
// binary, through TestMain) one of the helper processes the scenarios start
// instead of the load test itself. The load test builds nothing else: its
// floors and its go-sdk upstream are this executable, re-executed.
const roleEnv = "MCP_PROXY_LOADTEST_ROLE"

// childRoleEnv passes a role on to the child of a relay or bridge (the
// go-sdk upstream behind a floor): the floor strips its own roleEnv from the
// child's environment and sets this value in its place.
const childRoleEnv = "MCP_PROXY_LOADTEST_CHILD_ROLE"

// The roles, by value of roleEnv.
const (
	// roleRelay copies lines between its stdio and the command in its
	// arguments (the stdio floor, floor.go).
	roleRelay = "relay"
	// roleReverseProxy serves net/http's ReverseProxy to the URL in its
	// argument (the floor in front of an HTTP upstream, floor.go).
	roleReverseProxy = "reverse-proxy"
	// roleBridge serves Streamable HTTP POSTs by writing them to the stdio
	// command in its arguments (the HTTP floor, bridge.go).
	roleBridge = "bridge"
	// roleSDKEcho is the go-sdk echo server (sdkecho.go).
	roleSDKEcho = "sdk-echo"
	// roleOTLPSink accepts OTLP/HTTP trace exports and discards them
	// (otlpsink.go).
	roleOTLPSink = "otlp-sink"
)

// runRoleIfAsked runs the role roleEnv names and exits; it returns at once
// when roleEnv is unset.
func runRoleIfAsked() {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	args := os.Args[1:]
	var err error
	switch role {
	case roleRelay:
		err = relay(args)
	case roleReverseProxy:
		err = reverseProxy(args)
	case roleBridge:
		err = bridge(args)
	case roleSDKEcho:
		err = sdkEcho(args)
	case roleOTLPSink:
		err = otlpSink(args)
	default:
		err = fmt.Errorf("unknown %s %q", roleEnv, role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childEnv is the environment of a floor's child: this process's, without
// the role variables, plus the child's own role when childRoleEnv names one.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, roleEnv+"=") && !strings.HasPrefix(kv, childRoleEnv+"=") {
			env = append(env, kv)
		}
	}
	if r := os.Getenv(childRoleEnv); r != "" {
		env = append(env, roleEnv+"="+r)
	}
	return env
}

// startChild starts a floor's child, argv, with childEnv, its stderr on
// this process's, and pipes to its stdin and from its stdout.
func startChild(argv []string) (*exec.Cmd, io.WriteCloser, io.ReadCloser, error) {
	if len(argv) == 0 {
		return nil, nil, nil, errors.New("no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = childEnv()
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	return cmd, in, out, nil
}

// selfPath is this executable, which every role runs as.
func selfPath() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("own executable: %w", err)
	}
	return p, nil
}
