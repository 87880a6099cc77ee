// Package backoff holds the one schedule of waits that Marketplane uses
// between attempts at something that keeps failing: a local process that
// keeps exiting, an init command that keeps failing. The wait doubles with
// each attempt in a row, from a base up to a cap, and is computed from the
// count of attempts alone, so that a caller needs to remember nothing but
// that count.
package backoff
