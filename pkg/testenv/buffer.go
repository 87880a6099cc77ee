package testenv

import (
	"bytes"
	"strings"
	"sync"
)

// SyncBuffer collects text written from many goroutines, for example the
// log lines of controllers a test runs, to be searched or printed when the
// test fails. The zero value is ready to use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p. It never fails, so that a SyncBuffer can back an
// io.Writer such as a logger's output.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// WriteString appends s.
func (b *SyncBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// LinesWith returns the lines written so far that contain s, each ending
// in a newline: the log of one controller out of the log of many.
func (b *SyncBuffer) LinesWith(s string) string {
	var out strings.Builder
	for line := range strings.SplitSeq(b.String(), "\n") {
		if strings.Contains(line, s) {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}
