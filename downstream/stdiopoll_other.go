//go:build !unix

package downstream

import "io"

// pollableInput returns in as it is: see stdiopoll_unix.go.
func pollableInput(in io.Reader) (io.Reader, func()) { return in, func() {} }
