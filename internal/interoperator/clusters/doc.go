// Package clusters gives the inter-operator access to the clusters that
// service instances run on, registered as SFClusters on the platform
// cluster, and places instances on them.
//
// A Registry turns an SFCluster into a Target: a client built from the
// kubeconfig in the SFCluster's Secret (key "kubeconfig"), an Applier for
// it, and what bind templates may tell a tenant about it (.cluster: name,
// server, caData). Targets are cached per Secret resourceVersion; the
// Secret is read again at most once per refresh interval, so a rotated
// kubeconfig takes effect within it. Kubeconfigs with credential plugins
// are refused, and kubeconfigs never appear in logs, events or errors.
//
// Schedule is the default scheduler: an instance without spec.clusterId
// goes to the ProviderConfig's defaultCluster, or to the only SFCluster of
// the catalog namespace. Cordoned SFClusters (spec.unschedulable) take no
// new instances.
package clusters
