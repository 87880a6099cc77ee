/*
Copyright 2026 The Marketplane Authors.
*/

// Package v1alpha1 holds the configuration API of Marketplane's
// inter-operator, group interoperator.services.openmcp.cloud: the
// cluster-scoped ProviderConfig on the platform cluster. Like every
// service provider built on the provider runtime, the inter-operator reads
// the ProviderConfig named like itself (--provider-name, "interoperator" by
// default).
//
// +kubebuilder:object:generate=true
// +groupName=interoperator.services.openmcp.cloud
package v1alpha1
