package downstream

import (
	"strings"

	"github.com/rs/zerolog"
)

// zlogWriter turns mcp-go's standard-library log lines into zerolog events
// at warn level, so that nothing reaches stdout.
type zlogWriter struct{ log zerolog.Logger }

func (z zlogWriter) Write(b []byte) (int, error) {
	z.log.Warn().Str("component", "mcp-go").Msg(strings.TrimSpace(string(b)))
	return len(b), nil
}
