// Package landscape runs Marketplane on one machine, the local landscape
// behind `marketplane landscape up`: etcd, API servers for the platform,
// onboarding and workload clusters (package controlplane), the provider
// operator's replicas with the local cluster provider (package
// localcluster), then the steps added with AddStep (providers, catalog,
// broker). It keeps every process running, records them in a state
// directory so that a new start reuses ports, certificates and data, and
// lets one supervisor run per directory. docs/landscape.md describes it.
package landscape
