package testenv

import (
	"flag"
	"testing"
)

// SkipReason is what a test that needs API servers says when `go test
// -short` skips it.
const SkipReason = "needs API servers; run without -short"

// SkipIfShort skips t under `go test -short`, so that a short run executes
// only the pure unit tests and takes seconds. Start and StartMany call it;
// tests that use API servers started once per package in TestMain call it
// themselves, first thing.
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip(SkipReason)
	}
}

// Short reports whether the test binary runs with -short. Unlike
// testing.Short it may be called in TestMain before m.Run (it parses the
// command line first), so that TestMain can leave out starting the API
// servers its tests share:
//
//	if testenv.Short() {
//		return m.Run() // the tests that need the servers skip themselves
//	}
func Short() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return testing.Short()
}
