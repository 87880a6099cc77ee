/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
)

// ConditionScheduled is the condition of an SFServiceInstance in which the
// inter-operator records where the instance runs. It is True once the
// inter-operator's scheduler placed the instance on the SFCluster that
// spec.clusterId names and recorded it there (reason Scheduled), or once it
// accepted the SFCluster the instance's creator named in spec.clusterId
// (reason Pinned); False while such an SFCluster cannot take the instance.
// Tenants cannot write status, and spec.clusterId cannot change once set,
// so a True condition is the inter-operator's word for spec.clusterId.
const ConditionScheduled = "Scheduled"

// PlacedCluster returns the SFCluster the instance occupies, as far as the
// inter-operator is concerned: spec.clusterId once the inter-operator
// placed the instance there or accepted it there (ConditionScheduled is
// True), or once it applied objects for the instance (status.resources or
// status.appliedSpec: instances provisioned before the condition existed).
// It returns "" for an instance that names a cluster nobody accepted:
// what a tenant writes into spec.clusterId takes no room on a cluster and
// keeps no SFCluster from being deleted.
func (in *SFServiceInstance) PlacedCluster() string {
	if in.Spec.ClusterID == "" {
		return ""
	}
	if apimeta.IsStatusConditionTrue(in.Status.Conditions, ConditionScheduled) ||
		len(in.Status.Resources) > 0 || in.Status.AppliedSpec != nil {
		return in.Spec.ClusterID
	}
	return ""
}
