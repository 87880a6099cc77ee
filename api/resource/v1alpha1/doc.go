/*
Copyright 2026 The Marketplane Authors.
*/

// Package v1alpha1 holds the Service Fabrik cluster registry API of the group
// resource.servicefabrik.io: SFCluster, one object per Kubernetes cluster
// that service instances can be scheduled on. SFClusters live on the platform
// cluster.
//
// Every JSON field name matches Service Fabrik, so SFCluster manifests written
// for Service Fabrik apply to Marketplane unchanged. Marketplane adds
// spec.unschedulable (cordoning) and the status fields observedGeneration and
// conditions.
//
// +kubebuilder:object:generate=true
// +groupName=resource.servicefabrik.io
package v1alpha1
