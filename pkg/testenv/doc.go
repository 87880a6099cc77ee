// Package testenv starts real Kubernetes API servers (etcd plus
// kube-apiserver, and optionally kube-controller-manager) for tests, with
// every Marketplane CRD installed, and hands out clients for them.
//
// It is the test foundation of Marketplane and of providers built with it:
// tests run against real API servers, never only against fakes. Several
// environments can run at once, for example one each for the platform,
// onboarding, MCP and workload clusters. A test can stop a cluster's API
// server and start it again with the same address and certificates
// (Cluster.StopAPIServer, StartAPIServer), or cut the network to it with a
// Proxy. An API server serves the small set of API groups the local
// landscape's provisioned clusters serve (no storage, scheduling,
// autoscaling, certificates or flow control), which makes each start
// cheaper; WithFullAPI serves them all.
//
// The binaries are looked up in $KUBEBUILDER_ASSETS or, failing that, in the
// nearest bin/ directory above the working directory that contains
// kube-apiserver; `make tools` builds them there from source.
//
// Under `go test -short` nothing starts: Start and StartMany skip the calling
// test, and a TestMain that shares servers between its tests asks Short
// first while its tests call SkipIfShort. The package also holds the small
// helpers integration tests share: SyncBuffer collects the log lines of
// many controllers, ReconcileCount and MetricValue read controller-runtime's
// metrics to show that something does not happen.
package testenv
