/*
Copyright 2026 The Marketplane Authors.
*/

// Package v1alpha1 holds the marketplace API, group
// marketplace.services.openmcp.cloud: the cluster-scoped, read-only
// Offering on the onboarding cluster, one per offering a tenant can order,
// whether a ServiceProvider's kinds or a Service Fabrik SFService with its
// plans. Marketplane's marketplace controller writes them
// (internal/marketplace); tenants only read them (docs/marketplace.md).
//
// +kubebuilder:object:generate=true
// +groupName=marketplace.services.openmcp.cloud
package v1alpha1
