package testenv

import (
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// LogEnv is the environment variable that makes Logger log: a test run
// with TEST_LOG=1 shows the controllers' logs on stderr.
const LogEnv = "TEST_LOG"

// Logger returns the logger for the controllers of a test: to stderr, at
// verbosity 2, when LogEnv is set; else one that discards everything, so
// that a passing run stays quiet.
func Logger() logr.Logger {
	if os.Getenv(LogEnv) == "" {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 2, LogTimestamp: true})
}
