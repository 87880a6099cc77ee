// Package localcluster is the local landscape's cluster provider: a
// clusters.Provisioner that answers a ClusterRequest no registered cluster
// fits (by default every Exclusive request of purpose mcp) with a fresh
// kube-apiserver and kube-controller-manager under an etcd prefix of their
// own, registers it as a Cluster with its admin kubeconfig in a Secret, and
// records it in state.json so that a new start restores it or releases it.
// docs/landscape.md describes it.
package localcluster
