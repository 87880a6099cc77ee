package v1alpha1

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// AccessRequestSpec asks for credentials to one cluster, named directly or
// through the ClusterRequest that was granted it.
// +kubebuilder:validation:XValidation:rule="has(self.clusterRef) != has(self.requestRef)",message="exactly one of spec.clusterRef or spec.requestRef must be set"
// +kubebuilder:validation:XValidation:rule="has(self.token) != has(self.oidc)",message="exactly one of spec.token or spec.oidc must be set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.clusterRef) || has(self.clusterRef)",message="spec.clusterRef cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.requestRef) || has(self.requestRef)",message="spec.requestRef cannot be removed once set"
type AccessRequestSpec struct {
	// ClusterRef names the Cluster to access. Exactly one of clusterRef and
	// requestRef is set; it cannot be changed.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.clusterRef is immutable"
	ClusterRef *common.ObjectReference `json:"clusterRef,omitempty"`

	// RequestRef names the ClusterRequest whose Cluster to access. Exactly
	// one of clusterRef and requestRef is set; it cannot be changed.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.requestRef is immutable"
	RequestRef *common.ObjectReference `json:"requestRef,omitempty"`

	// Token asks for a service account token bound to the given
	// permissions. Exactly one of token and oidc is set.
	// +optional
	Token *TokenConfig `json:"token,omitempty"`

	// OIDC asks for access through an OIDC identity provider. Exactly one
	// of token and oidc is set.
	// +optional
	OIDC *OIDCConfig `json:"oidc,omitempty"`

	// TTL is how long the issued credentials stay valid, e.g. "1h" or
	// "24h". When unset, the ClusterProvider chooses. A value that is not a
	// duration is refused by the API server; one stored before that rule
	// existed denies this request (reason InvalidSpec) and nothing else.
	// +optional
	TTL *common.Duration `json:"ttl,omitempty"`
}

// TokenConfig describes token-based access: a service account on the target
// cluster, bound to new and existing roles.
type TokenConfig struct {
	// Permissions become new Roles and ClusterRoles bound to the service
	// account (at most 64).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Permissions []PermissionsRequest `json:"permissions,omitempty"`

	// RoleRefs name existing Roles and ClusterRoles bound to the service
	// account (at most 64).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	RoleRefs []common.RoleRef `json:"roleRefs,omitempty"`
}

// OIDCConfig describes OIDC-based access: the identity provider, its role
// bindings, and roles to create for them.
type OIDCConfig struct {
	common.OIDCProviderConfig `json:",inline"`

	// Roles become new Roles and ClusterRoles that are not bound to anyone;
	// name them so that roleBindings can refer to them.
	// +optional
	Roles []PermissionsRequest `json:"roles,omitempty"`
}

// PermissionsRequest is a set of RBAC rules that becomes a Role in a
// namespace, or a ClusterRole when no namespace is given.
type PermissionsRequest struct {
	// Name is the name of the created Role or ClusterRole. When empty a
	// unique name is generated. The request is not granted if a role of
	// this name exists that the request does not manage. At most 253
	// characters, an object name's.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Namespace is the namespace of the Role; empty means a ClusterRole. At
	// most 63 characters, a namespace name's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// DisableAutomaticNamespaceCreation stops the namespace of a Role from
	// being created when it does not exist; the request then waits for it.
	// +optional
	DisableAutomaticNamespaceCreation bool `json:"disableAutomaticNamespaceCreation,omitempty"`

	// Rules are the RBAC rules of the role, at most 256, far more than a
	// role needs.
	// +required
	// +kubebuilder:validation:MaxItems=256
	Rules []rbacv1.PolicyRule `json:"rules"`
}

// AccessRequestStatus is the observed state of an access request.
type AccessRequestStatus struct {
	common.Status `json:",inline"`

	// SecretRef names the Secret that holds the credentials (key
	// "kubeconfig" and the other SecretKey* keys); it lives in the
	// AccessRequest's namespace. It is set when the request is granted. Both
	// name and namespace are written, so that readers expecting either the
	// older namespaced or the newer local reference of openMCP find the
	// Secret.
	// +optional
	SecretRef *common.ObjectReference `json:"secretRef,omitempty"`
}

// IsGranted reports whether the request has been granted.
func (s AccessRequestStatus) IsGranted() bool { return s.Phase == RequestGranted }

// IsDenied reports whether the request has been denied.
func (s AccessRequestStatus) IsDenied() bool { return s.Phase == RequestDenied }

// IsPending reports whether the request has been neither granted nor denied.
func (s AccessRequestStatus) IsPending() bool {
	return s.Phase == "" || s.Phase == RequestPending
}

// AccessRequest asks the responsible ClusterProvider for credentials to a
// cluster, scoped to the requested permissions. The credentials arrive as a
// kubeconfig Secret named in status.secretRef.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ar;areq,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=".spec.clusterRef.name"
// +kubebuilder:printcolumn:name="Request",type=string,JSONPath=".spec.requestRef.name"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=".status.secretRef.name"
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.metadata.labels["clusters.openmcp.cloud/provider"]`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type AccessRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the request.
	// +required
	Spec AccessRequestSpec `json:"spec,omitempty"`
	// Status is the observed state.
	// +optional
	Status AccessRequestStatus `json:"status,omitempty"`
}

// AccessRequestList is a list of AccessRequests.
//
// +kubebuilder:object:root=true
type AccessRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the AccessRequests.
	Items []AccessRequest `json:"items"`
}
