package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// OpenNone is the auth.open value that opens nothing: the URL is only
// printed or logged.
const OpenNone = "none"

// SplitCommand splits a command line the way a POSIX shell splits words,
// without any expansion: blanks (space, tab, CR, LF, VT, FF) separate words, single quotes keep
// everything literally, double quotes keep everything but \" and \\, and a
// backslash outside quotes escapes the next character. An unterminated
// quote is an error.
func SplitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isBlank(c):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// OpenerArgs returns the command that opens a URL for the auth.open value
// open: "" means the desktop's opener (xdg-open on Linux, open on macOS)
// when it is on PATH; "none", or no opener found, gives nil. lookPath
// defaults to exec.LookPath.
func OpenerArgs(open string, lookPath func(string) (string, error)) ([]string, error) {
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	switch strings.TrimSpace(open) {
	case OpenNone:
		return nil, nil
	case "":
		name := "xdg-open"
		if runtime.GOOS == "darwin" {
			name = "open"
		}
		if p, err := lookPath(name); err == nil {
			return []string{p}, nil
		}
		return nil, nil
	}
	args, err := SplitCommand(open)
	if err != nil {
		return nil, fmt.Errorf("auth.open: %w", err)
	}
	if len(args) == 0 {
		return nil, errors.New("auth.open: empty command")
	}
	return args, nil
}

// runOpener runs args with url as the last argument, without a shell, in
// a process group of its own; its output goes to out (never the proxy's
// stdout, which may be the MCP protocol). It waits for the command; if ctx
// ends first, the command's group is killed.
func runOpener(ctx context.Context, args []string, url string, out io.Writer) error {
	cmd := exec.CommandContext(ctx, args[0], append(args[1:len(args):len(args)], url)...)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("auth.open command %s: %w", args[0], err)
	}
	return nil
}

// isBlank reports the ASCII blanks that separate words of a command line.
func isBlank(c byte) bool { return strings.IndexByte(" \t\r\n\v\f", c) >= 0 }
