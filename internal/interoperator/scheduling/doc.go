// Package scheduling places SFServiceInstances on SFClusters. A Placer
// decides for one instance at a time, under a lock, counting what the cache
// and its own recent decisions put on each cluster; it filters the
// SFClusters (deleted, cordoned, not Ready, outside the plan's
// clusterSelector, too full) and hands the rest to the configured
// Scheduler: default, round-robin, least-filled, least-utilized or
// label-selector. docs/multicluster.md describes each.
package scheduling
