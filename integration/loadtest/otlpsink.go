package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// sinkReadHeaderTimeout bounds a request's headers at the OTLP sink.
const sinkReadHeaderTimeout = 10 * time.Second

// sinkReadyPrefix starts the sink's ready line on stderr.
const sinkReadyPrefix = "otlp sink listening on "

// otlpSink serves OTLP/HTTP trace exports on a loopback port and discards
// them: it reads each body whole and answers 200 with an empty
// ExportTraceServiceResponse (an empty protobuf message is zero bytes). It
// runs as a process of its own (roleOTLPSink) so that its CPU is reported
// apart from the proxy's.
func otlpSink([]string) error {
	ln, err := net.Listen("tcp", loopback+":0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	fmt.Fprintf(os.Stderr, "%shttp://%s\n", sinkReadyPrefix, ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: sinkReadHeaderTimeout}
	return srv.Serve(ln) // until the load test stops the process
}

// sinkURL reads the sink's ready line.
func sinkURL(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), sinkReadyPrefix)
	return rest, ok && strings.HasPrefix(rest, "http://"+loopback+":")
}
