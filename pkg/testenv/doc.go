// Package testenv starts real Kubernetes API servers (etcd plus
// kube-apiserver, and optionally kube-controller-manager) for tests, with
// every Marketplane CRD installed, and hands out clients for them.
//
// It is the test foundation of Marketplane and of providers built with it:
// tests run against real API servers, never only against fakes. Several
// environments can run at once, for example one each for the platform,
// onboarding, MCP and workload clusters.
//
// The binaries are looked up in $KUBEBUILDER_ASSETS or, failing that, in the
// nearest bin/ directory above the working directory that contains
// kube-apiserver; `make tools` builds them there from source.
package testenv
