// Package controlplane runs the processes of the local landscape: one etcd
// and, per cluster, a kube-apiserver with its own etcd prefix and a
// kube-controller-manager, all on loopback ports with TLS everywhere. It
// also keeps the landscape's record, state.json, and the layout of its
// state directory.
//
// Processes are started through package supervisor, from one OS thread
// that lives as long as the Runner, with Pdeathsig, so that they die with the process that started
// them even when it is killed; each runs in its own process group, so that
// Ctrl-C in a terminal reaches the landscape only and the landscape stops
// them in order. A process recorded by an earlier run is recognised by its
// PID, its start time and its command line (see Alive), never by name
// alone, so that a PID reused by an unrelated process is left alone.
package controlplane
