// Package spruntime is the service provider runtime: a generic reconciler
// (NewAPIReconciler) that turns writing an openMCP-compatible service
// provider into implementing CreateOrUpdate and Delete, plus an optional
// Observe. The runtime owns what every provider needs: finalizers, the
// ProviderConfig, cluster access, status (observedGeneration, phase, the
// Ready and Synced conditions), events for transitions, metrics, requeues
// with jitter, the openmcp.cloud annotations, and deletion that waits for
// tenants' objects. docs/providers.md describes the contract in full.
package spruntime
