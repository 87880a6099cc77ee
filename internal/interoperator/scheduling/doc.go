// Package scheduling places SFServiceInstances on SFClusters.
//
// A Placer decides for one instance at a time, under a lock, so that two
// instances racing for the last free slot of a cluster never both get it:
// it counts what is placed on every cluster from the onboarding cluster's
// cache plus the decisions it made that the cache does not show yet. It
// filters the SFClusters of the catalog namespace (deleted, cordoned, not
// Ready, not matching the plan's clusterSelector, too full for the plan's
// context.requests) and hands the rest to the configured Scheduler:
//
//   - default: the ProviderConfig's defaultCluster (or Service Fabrik's
//     primaryClusterId), otherwise the only cluster; a default cluster
//     that the plan's clusterSelector leaves out counts as none;
//   - round-robin: the next cluster by name after the one chosen last,
//     which is recorded on the SFClusters so that it survives restarts and
//     leader changes;
//   - least-filled: the cluster with the fewest instances;
//   - least-utilized: the cluster with the most free capacity;
//   - label-selector: Service Fabrik's: least-filled for plans without
//     requests, least-utilized for plans with requests.
//
// The scheduler type comes from the ProviderConfig's spec.schedulerType or,
// when that is unset, from Service Fabrik's interoperator-config ConfigMap
// (see Config).
package scheduling
