// Package landscape runs Marketplane on one machine: the local landscape
// behind `marketplane landscape up`. It starts one etcd and a real
// kube-apiserver with a kube-controller-manager for each of the platform,
// onboarding and workload clusters (package controlplane; the workload
// cluster also with kube-scheduler and kwok, which simulate two nodes and
// the pods on them, so that Deployments become Available), registers the
// onboarding and workload clusters as Clusters on the platform cluster,
// runs the provider operator as OperatorReplicas processes of
// marketplane-operator with leader election and the process deployer,
// serves them the local cluster provider (package localcluster, a fresh API
// server for each Exclusive ClusterRequest) on a Unix socket, then runs the
// steps added with AddStep (the providers, the catalog, the broker) and
// prints a summary.
//
// Everything lives in a state directory (DefaultStateDir), see
// controlplane.Layout: state.json records every process, port and cluster;
// kubeconfigs/<cluster>.kubeconfig are admin kubeconfigs; logs/ has the
// output of every process (the operator replicas' included) and
// landscape.log, the supervisor's own.
//
// Lifecycle:
//
//   - Start starts everything and returns once it is ready; Wait blocks
//     until the context ends or the landscape fails (the local cluster
//     provider's socket or a step's background function failed); Stop stops
//     everything in order (steps' stop functions, the operator and
//     the providers it runs, provisioned clusters, controller managers, API
//     servers, etcd) and keeps the data. Run does all three.
//   - While it runs, the landscape heals by itself: a process of it
//     (etcd, an API server, a controller manager, one a step started with
//     StartProcess, such as the broker) that exits on its own is started
//     again with the same command, on the same ports, certificates and
//     data, after a backoff (1 s doubling up to 30 s; see
//     controlplane.WithRestarts); clients of it reconnect by themselves.
//     A process crashing in a loop stops neither the others nor the
//     landscape. Each exit and restart is a progress line and a line of
//     landscape.log, and state.json counts the restarts and keeps the
//     last exit of each process, which status shows. Providers are
//     restarted by the operator's process deployer the same way.
//   - Started again on the same state directory, a landscape reuses it:
//     same ports, certificates and etcd data, so kubeconfigs handed out
//     earlier keep working, and the clusters provisioned earlier are
//     started again (or released when their ClusterRequest is gone). This
//     is also how a crash is recovered from: processes of the crashed run
//     that are still alive are stopped first (they are recognised by PID,
//     start time and binary), then everything starts again from the
//     record. A recorded port another process took meanwhile is replaced
//     by a free one (controlplane.MoveTakenPorts) and the progress output
//     says so; the landscape's kubeconfigs, Cluster registrations and
//     broker.env are rewritten, and the operator rewrites AccessRequest
//     kubeconfigs. Tokens stay valid (the service-account issuer is kept).
//     Down and a new start begin afresh.
//   - Down stops what a previous start left running (asking a live
//     supervisor to stop first) and removes the state directory.
//   - Only one supervisor runs per state directory (an flock on
//     <state>/lock).
package landscape
