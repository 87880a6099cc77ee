package app

import (
	"log"
	"strings"

	"github.com/go-logr/logr"
)

// newServerErrorLog routes net/http's own messages (TLS handshake errors,
// malformed requests) to the logger at V(1). They name client addresses,
// never request contents.
func newServerErrorLog(l logr.Logger) *log.Logger {
	return log.New(logWriter{l.WithName("http")}, "", 0)
}

type logWriter struct{ l logr.Logger }

// Write implements io.Writer.
func (w logWriter) Write(p []byte) (int, error) {
	w.l.V(1).Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
