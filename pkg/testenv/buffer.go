package testenv

import "github.com/marketplane/marketplane/pkg/syncbuf"

// SyncBuffer collects text written from many goroutines, for example the
// log lines of controllers a test runs, to be searched or printed when the
// test fails (syncbuf.Buffer). The zero value is ready to use.
type SyncBuffer = syncbuf.Buffer
