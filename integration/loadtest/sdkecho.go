package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxSDKPayload bounds -payload-bytes of the go-sdk echo server: the largest
// scenario pads to 1 MiB, and the text must fit in one message.
const maxSDKPayload = maxMessageBytes / 2

// sdkEcho is the go-sdk upstream: a server built the way a go-sdk user
// writes one, with one typed tool, echo, that returns its "text" argument
// as text content, padded to -payload-bytes (as the fixture's echo pads
// it). It serves stdio until stdin ends, or with -http ADDR Streamable HTTP
// (the go-sdk's own handler, sessions and event streams as it does them by
// default) on /mcp, announced on stderr as "listening on URL" like the
// fixture.
func sdkEcho(args []string) error {
	fs := flag.NewFlagSet(roleSDKEcho, flag.ContinueOnError)
	addr := fs.String("http", "", "serve Streamable HTTP on this address instead of stdio")
	payload := fs.Int("payload-bytes", 0, "pad the echo tool's text content to this many bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *payload < 0 || *payload > maxSDKPayload {
		return fmt.Errorf("-payload-bytes must be between 0 and %d", maxSDKPayload)
	}
	s := newSDKEchoServer(*payload)
	if *addr == "" {
		err := s.Run(context.Background(), &mcp.StdioTransport{})
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	fmt.Fprintf(os.Stderr, "sdk-echo: listening on http://%s/mcp\n", ln.Addr())
	return http.Serve(ln, mux)
}

// echoArgs are the echo tool's arguments.
type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

// newSDKEchoServer returns the go-sdk server with the echo tool.
func newSDKEchoServer(payload int) *mcp.Server {
	padding := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", payload/36+1)
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-echo", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			text := in.Text
			if pad := payload - len(text); pad > 0 {
				text += padding[:pad]
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	return s
}
