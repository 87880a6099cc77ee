/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadClusters makes the inter-operator register openMCP workload
// clusters as SFClusters: for every clusters.openmcp.cloud Cluster of
// purpose workload in namespace (matching labelSelector), it requests
// access with an AccessRequest in the catalog namespace and creates an
// SFCluster of the Cluster's name whose secretRef is the AccessRequest's
// kubeconfig Secret. A Cluster that goes (or stops matching) offboards its
// SFCluster; the AccessRequest is deleted once the SFCluster is gone.
type WorkloadClusters struct {
	// namespace is the namespace on the platform cluster whose Clusters
	// are registered.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// labelSelector narrows the Clusters; empty means every Cluster of
	// purpose workload in the namespace.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// permissions are the cluster-wide rules the AccessRequests ask for:
	// what the catalog's templates and the clusters' components render
	// (Namespaces and the kinds of the plans). They have no default, so
	// that admin rights on a workload cluster are always the platform
	// operator's explicit choice.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	Permissions []rbacv1.PolicyRule `json:"permissions"`
}
