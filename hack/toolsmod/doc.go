// Package toolsmod holds the check that the tools module hack/tools/cluster
// (etcd, the Kubernetes binaries and kwok for the tests and the landscape)
// and the main module require the same version of every module both need.
// Go's build cache then compiles a package they share once for both: a first
// `make run` or `make test` compiles about a third fewer packages than with
// tools modules whose versions drift apart (docs/contributing.md).
package toolsmod
