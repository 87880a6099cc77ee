// Package e2e holds the end-to-end test of the local landscape: it does
// what `make run` does (in a directory of its own, with the binaries it
// builds), follows the README's quick start block by block, and checks
// that `landscape down` leaves no process and no listening port behind. It
// is part of `make test`; `make test-e2e` runs it alone; `go test -short`
// skips it.
package e2e
