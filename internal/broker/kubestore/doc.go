// Package kubestore is the Kubernetes implementation of broker.Store: it
// keeps the broker's records as SFServiceInstances and SFServiceBindings on
// the onboarding cluster, one namespace (sf-<instance>) per instance, reads
// them through an informer cache with an API-server fallback, and reads bind
// responses from the provisioner's Secrets without caching them.
//
// Its Reaper releases tombstones: objects whose deletion finished and that
// only the broker's finalizer still holds, once they have been visible for
// a configurable time. Releasing an instance also deletes the namespace the
// broker created for it.
package kubestore
