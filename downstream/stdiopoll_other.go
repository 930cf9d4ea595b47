//go:build !unix

package downstream

import "io"

// pollableInput returns in as it is: see stdiopoll_unix.go.
func pollableInput(in io.Reader, _ io.Writer) (io.Reader, func()) { return in, func() {} }

// pollableOutput returns out as it is: see stdiopoll_unix.go.
func pollableOutput(out io.Writer, _ io.Reader, _ io.Writer) (io.Writer, func()) {
	return out, func() {}
}
