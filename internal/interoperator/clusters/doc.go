// Package clusters gives the inter-operator access to the clusters that
// service instances run on, registered as SFClusters on the platform
// cluster, and keeps their status (package scheduling places instances).
//
// A Registry turns an SFCluster into a Target: a client built from the
// kubeconfig in the SFCluster's Secret (key "kubeconfig"), an Applier for
// it, and what bind templates may tell a tenant about it (.cluster: name,
// server, caData). Targets are cached per Secret resourceVersion; the
// Secret is read again at most once per refresh interval, so a rotated
// kubeconfig takes effect within it. Kubeconfigs with credential plugins
// are refused, and kubeconfigs never appear in logs, events or errors.
//
// StatusReconciler keeps every SFCluster's status live (instances, the sum
// of their plans' context.requests, node capacity, a Ready condition from a
// reachability check with backoff) and offboards SFClusters: a finalizer
// blocks the deletion of one that instances still run on, with a drain
// report, and the Registry forgets the cluster once it is gone
// (docs/multicluster.md).
package clusters
