/*
Copyright 2026 The Marketplane Authors.
*/

// Package v1alpha1 holds the Service Fabrik inter-operator API of the group
// osb.servicefabrik.io: the catalog kinds SFService and SFPlan, which live on
// the platform cluster, and SFServiceInstance and SFServiceBinding, which
// record Open Service Broker requests on the onboarding cluster. Every JSON
// field name matches Service Fabrik, so SFService, SFPlan,
// SFServiceInstance and SFServiceBinding manifests written for Service Fabrik
// apply to Marketplane unchanged. Marketplane adds only status fields
// (observedGeneration and conditions) and, on SFService, the older field
// spellings that Service Fabrik's own design document still uses, kept as
// deprecated aliases.
//
// +kubebuilder:object:generate=true
// +groupName=osb.servicefabrik.io
package v1alpha1
