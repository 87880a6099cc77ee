// Package controlplane runs the processes of the local landscape: one etcd
// and, per cluster, a kube-apiserver with its own etcd prefix and a
// kube-controller-manager, all on loopback ports with TLS everywhere; a
// cluster that runs workloads (WithWorkloads) also gets kube-scheduler and
// kwok with simulated nodes (kwok.go). It also keeps the landscape's record, state.json, and the layout of its
// state directory.
//
// Processes are started through package supervisor, from one OS thread
// that lives as long as the Runner, with Pdeathsig, so that they die with the process that started
// them even when it is killed; each runs in its own process group, so that
// Ctrl-C in a terminal reaches the landscape only and the landscape stops
// them in order. A process recorded by an earlier run is recognised by its
// PID, its start time and its command line (see Alive), never by name
// alone, so that a PID reused by an unrelated process is left alone.
//
// The ControlPlane's Runner keeps every process it starts running (see
// WithRestarts): one that exits on its own is started again with the same
// command, so on the same ports, certificates and data, after a backoff of
// 1 s doubling up to 30 s (starting over once it stayed up a minute).
// Its record in state.json follows, with the count of restarts and how it
// last exited. Clients of a restarted process reconnect by themselves.
package controlplane
