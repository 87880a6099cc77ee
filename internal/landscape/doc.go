// Package landscape runs Marketplane on one machine: the local landscape
// behind `marketplane landscape up`. It starts one etcd and a real
// kube-apiserver with a kube-controller-manager for each of the platform,
// onboarding and workload clusters (package controlplane), registers the
// onboarding and workload clusters as Clusters on the platform cluster,
// runs the provider operator in-process with the process deployer and the
// local cluster provider (package localcluster, a fresh API server for each
// Exclusive ClusterRequest), then runs the steps added with AddStep (the
// providers, the catalog, the broker) and prints a summary.
//
// Everything lives in a state directory (DefaultStateDir), see
// controlplane.Layout: state.json records every process, port and cluster;
// kubeconfigs/<cluster>.kubeconfig are admin kubeconfigs; logs/ has the
// output of every process and the operator's log.
//
// Lifecycle:
//
//   - Start starts everything and returns once it is ready; Wait blocks
//     until the context ends or a process of the landscape dies; Stop
//     stops everything in order (steps' stop functions, the operator and
//     the providers it runs, provisioned clusters, controller managers, API
//     servers, etcd) and keeps the data. Run does all three.
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
