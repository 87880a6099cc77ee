// Package localcluster is the local landscape's cluster provider: a
// clusters.Provisioner that answers a ClusterRequest nothing registered
// fits (by default every request of purpose mcp, which is Exclusive) with a
// fresh kube-apiserver and kube-controller-manager on the landscape's etcd,
// under an etcd prefix of its own.
//
// The cluster is registered on the platform cluster, in the landscape's
// namespace, as a Cluster named <purpose>-<hash of the request UID> with
// profile "local", the request's purpose, tenancy Exclusive, the label
// clusters.openmcp.cloud/provider=local, the annotation
// clusters.marketplane.io/kubeconfig-secret naming the Secret
// <cluster>-kubeconfig with its admin kubeconfig, and the annotation
// clusters.marketplane.io/provisioned-for with the request's UID. Release
// stops its processes, deletes its etcd keys, files, Secret and Cluster.
//
// Every cluster is recorded in the landscape's state.json, so that a
// landscape started again restarts the clusters of requests that still
// exist (same port, same data, so handed-out kubeconfigs keep working) and
// releases the others (Restore).
package localcluster
