// Package clusteraccess is how a service provider obtains the clusters it
// acts on: a Manager asks, with the provider's own identity and in its own
// namespace on the platform cluster, for ClusterRequests and AccessRequests
// (a tenant's MCP per service object, a shared workload cluster, or any
// cluster by purpose), with least privilege by default, and builds clients
// from the kubeconfig Secrets the operator writes, following token
// refreshes. docs/providers.md describes it.
package clusteraccess
