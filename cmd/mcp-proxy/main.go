// Command mcp-proxy is an aggregating MCP proxy: one MCP server in front of
// many. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcp-proxy/mcp-proxy/sanitize"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		printError(os.Stderr, err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// printError writes the error that ends the program. It may carry an
// upstream's words (a tool's error, a server's refusal): they are escaped
// for the terminal.
func printError(w io.Writer, err error) {
	fmt.Fprintln(w, "mcp-proxy:", sanitize.Terminal(err.Error()))
}
