// Package e2e holds the end-to-end test of the local landscape: it runs
// `make run`, follows the README's quick start block by block, and checks
// that `landscape down` leaves no process and no listening port behind. It
// is built only with the e2e tag (`make test-e2e`).
package e2e
