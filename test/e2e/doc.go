// Package e2e holds the end-to-end tests. TestQuickStart does what
// `make run` does (in a directory of its own, with the binaries it
// builds), follows the README's quick start block by block, and checks
// that `landscape down` leaves no process and no listening port behind.
// The TestValidate tests run the validation flow: the `marketplane
// validate` binary on the sample provider, and pkg/validation on the
// inter-operator as a ServiceProvider. They are part of `make test`;
// `make test-e2e` runs them with the other validation runs; `go test
// -short` skips them.
package e2e
