// Package app is the marketplane-broker process: its flags, and Run, which
// builds a controller-runtime manager on the platform cluster (no leader
// election: every replica serves) and runs on it the catalog watcher
// (catalog namespace cache), the Kubernetes store's cache and tombstone
// reaper (onboarding cluster, a second cluster.Cluster), the OSB server
// with its certificate watcher, the broker's own metrics and probe server,
// and credential rotation from a Secret; on shutdown the OSB server lets
// in-flight requests finish before the caches stop.
package app
