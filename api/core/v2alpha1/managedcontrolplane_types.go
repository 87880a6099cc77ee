package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
)

// ManagedControlPlaneSpec is the desired state of a managed control plane.
type ManagedControlPlaneSpec struct {
	// IAM says who gets access to the control plane and how.
	// +required
	IAM IAMConfig `json:"iam"`
}

// IAMConfig configures access to a managed control plane: users of OIDC
// providers and static service account tokens.
type IAMConfig struct {
	// Tokens are static service account tokens; each gets its own
	// kubeconfig Secret in status.access under the token's name. At most
	// 64: each becomes an AccessRequest and a ServiceAccount, a Secret on
	// the onboarding cluster and a condition in the status.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	Tokens []TokenConfig `json:"tokens,omitempty"`

	// OIDC configures access for users of OIDC identity providers.
	// +optional
	OIDC *OIDCConfig `json:"oidc,omitempty"`
}

// TokenConfig is a named static token and the permissions its service
// account gets.
type TokenConfig struct {
	// Name identifies the token; it is unique within the control plane and
	// becomes part of the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	clustersv1alpha1.TokenConfig `json:",inline"`
}

// OIDCConfig configures OIDC-based access to a managed control plane.
type OIDCConfig struct {
	// DefaultProvider binds users of the platform's standard OIDC provider.
	// Without role bindings the standard provider is not configured.
	// +optional
	DefaultProvider *DefaultProviderConfig `json:"defaultProvider,omitempty"`

	// ExtraProviders are further OIDC providers, in addition to the
	// standard one. At most 63: Kubernetes' structured authentication takes
	// at most 64 JWT authenticators, one of them the standard provider's.
	// +optional
	// +kubebuilder:validation:MaxItems=63
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:XValidation:rule="self.all(p, p.name != 'default')",message="'default' is reserved for the standard OIDC provider and cannot name an extra provider"
	ExtraProviders []common.OIDCProviderConfig `json:"extraProviders,omitempty"`
}

// DefaultProviderConfig holds the role bindings for users of the platform's
// standard OIDC provider.
type DefaultProviderConfig struct {
	// RoleBindings bind users and groups of the standard provider to roles
	// (at most 64).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	RoleBindings []common.RoleBindings `json:"roleBindings,omitempty"`
}

// ManagedControlPlaneStatus is the observed state of a managed control
// plane.
type ManagedControlPlaneStatus struct {
	common.Status `json:",inline"`

	// Access maps each OIDC provider name ("default" for the standard
	// provider) and each token name to the Secret, in the
	// ManagedControlPlane's namespace, whose "kubeconfig" key grants that
	// access.
	// +optional
	Access map[string]common.LocalObjectReference `json:"access,omitempty"`

	// Endpoints are the URLs of the MCP cluster that the platform exposes
	// to the tenant, such as apiserver-external.
	// +optional
	// +listType=map
	// +listMapKey=name
	Endpoints []clustersv1alpha1.Endpoint `json:"endpoints,omitempty"`
}

// ManagedControlPlane is a tenant's control plane. Service objects for it
// live on the onboarding cluster with the same name and namespace; deleting
// the ManagedControlPlane deletes them.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcp,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Kubeconfig",type=string,JSONPath=".status.access.default.name",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ManagedControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec ManagedControlPlaneSpec `json:"spec,omitempty"`
	// Status is the observed state.
	// +optional
	Status ManagedControlPlaneStatus `json:"status,omitempty"`
}

// ControlPlaneSpec returns the spec, for code that serves both control-plane
// kinds (ManagedControlPlane and ControlPlane).
func (m *ManagedControlPlane) ControlPlaneSpec() *ManagedControlPlaneSpec { return &m.Spec }

// ControlPlaneStatus returns the status, for code that serves both
// control-plane kinds.
func (m *ManagedControlPlane) ControlPlaneStatus() *ManagedControlPlaneStatus { return &m.Status }

// ManagedControlPlaneList is a list of ManagedControlPlanes.
//
// +kubebuilder:object:root=true
type ManagedControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ManagedControlPlanes.
	Items []ManagedControlPlane `json:"items"`
}
