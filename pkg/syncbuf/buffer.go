// Package syncbuf holds Buffer, a text buffer many goroutines can write.
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer collects text written from many goroutines, for example the
// log lines of controllers a test runs, to be searched or printed when the
// test fails. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p. It never fails, so that a Buffer can back an
// io.Writer such as a logger's output.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// WriteString appends s.
func (b *Buffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// LinesWith returns the lines written so far that contain s, each ending
// in a newline: the log of one controller out of the log of many.
func (b *Buffer) LinesWith(s string) string {
	var out strings.Builder
	for line := range strings.SplitSeq(b.String(), "\n") {
		if strings.Contains(line, s) {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}
