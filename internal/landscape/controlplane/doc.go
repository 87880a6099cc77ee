// Package controlplane runs the processes of the local landscape: one etcd
// and, per cluster, a kube-apiserver and a kube-controller-manager on
// loopback ports with TLS (a workload cluster also kube-scheduler and kwok),
// each restarted with backoff when it exits on its own (WithRestarts). It
// keeps the landscape's record, state.json, and the layout of its state
// directory, and recognises a recorded process by PID, start time and
// command line, never by name alone. docs/landscape.md describes it.
package controlplane
