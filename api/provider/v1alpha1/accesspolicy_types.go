package v1alpha1

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// AccessPolicy is what the platform operator lets one provider ask for,
// beyond the defaults every provider gets (a Marketplane extension; see
// docs/security.md). The operator enforces it on the provider's
// AccessRequests and ClusterRequests and on the kinds it registers in
// status.resources. The provider itself cannot change it: it can write only
// its status.
type AccessPolicy struct {
	// APIGroups are API groups the provider may own although they are
	// reserved (the core and built-in groups, openmcp.cloud and its
	// subdomains other than *.services.openmcp.cloud, servicefabrik.io and
	// its subdomains), or that it must own although another provider
	// registered them first. A provider owns the groups it may register in
	// status.resources, get rights on, and request rights on in other
	// clusters.
	// +optional
	// +listType=set
	APIGroups []string `json:"apiGroups,omitempty"`

	// Onboarding are rules the provider may request on the onboarding
	// cluster in addition to the default ceiling (its own groups, CRDs of its
	// own groups, events, reading ManagedControlPlanes).
	// +optional
	Onboarding []rbacv1.PolicyRule `json:"onboarding,omitempty"`

	// MCP are rules the provider may request on the MCP clusters of its
	// tenants in addition to the default ceiling.
	// +optional
	MCP []rbacv1.PolicyRule `json:"mcp,omitempty"`

	// Workload are rules the provider may request on shared workload
	// clusters in addition to the default ceiling.
	// +optional
	Workload []rbacv1.PolicyRule `json:"workload,omitempty"`

	// RoleRefs are the ClusterRoles the provider may name in the roleRefs
	// of its AccessRequests, per kind of cluster, whatever their rules:
	// Kubernetes' admin roles (cluster-admin, admin, edit, system:*),
	// which are refused unless named here, and aggregated ClusterRoles,
	// whose rules can grow. Naming one grants the provider whatever that
	// role holds on every cluster of the kind, now and after the cluster
	// changes it. Other roleRefs need no entry: their rules are read from
	// the target cluster and must be within the ceiling and the extra rules.
	// +optional
	RoleRefs *RoleRefGrants `json:"roleRefs,omitempty"`

	// MaxClusterRequests is how many ClusterRequests the provider may have
	// at once in its namespace, and again in the platform namespace of each
	// of its tenants' ManagedControlPlanes (each counted on its own); 8 when
	// unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxClusterRequests *int32 `json:"maxClusterRequests,omitempty"`

	// MaxExclusiveClusters is how many of its ClusterRequests, in its
	// namespace and all its tenants' MCP namespaces together, may ask for a
	// cluster of an Exclusive purpose (each can be a new cluster); 0 when
	// unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxExclusiveClusters *int32 `json:"maxExclusiveClusters,omitempty"`

	// Secrets is where the provider's run ServiceAccount may read Secrets
	// on the platform cluster: OwnNamespace (the default) or ClusterWide.
	// ClusterWide adds get, list and watch on Secrets in every namespace,
	// which openMCP's opencontrolplane-runtime needs when its Secret
	// watcher is on. It lets the provider read every kubeconfig on the
	// platform cluster, the other providers' and the tenants' MCP admin
	// kubeconfigs included: grant it only to a provider trusted that far.
	// +optional
	// +kubebuilder:validation:Enum=OwnNamespace;ClusterWide
	Secrets SecretAccess `json:"secrets,omitempty"`
}

// RoleRefGrants names, per kind of cluster, the ClusterRoles a provider
// may bind through roleRefs without their rules being checked.
type RoleRefGrants struct {
	// Onboarding are ClusterRole names on the onboarding cluster.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Onboarding []string `json:"onboarding,omitempty"`

	// MCP are ClusterRole names on the MCP clusters of the provider's
	// tenants and on clusters it holds exclusively.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	MCP []string `json:"mcp,omitempty"`

	// Workload are ClusterRole names on shared workload clusters.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Workload []string `json:"workload,omitempty"`
}

// SecretAccess is where a provider may read Secrets on the platform
// cluster.
type SecretAccess string

// The values of spec.accessPolicy.secrets.
const (
	// SecretAccessOwnNamespace: Secrets of the provider's own namespace
	// only, and the kubeconfig Secrets of its own AccessRequests in its
	// tenants' MCP namespaces (the default).
	SecretAccessOwnNamespace SecretAccess = "OwnNamespace"
	// SecretAccessClusterWide: get, list and watch on Secrets in every
	// namespace.
	SecretAccessClusterWide SecretAccess = "ClusterWide"
)
