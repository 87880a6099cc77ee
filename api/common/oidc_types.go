package common

import rbacv1 "k8s.io/api/rbac/v1"

// OIDCProviderConfig describes an OpenID Connect identity provider whose
// users and groups get access to a cluster, and the role bindings they get.
type OIDCProviderConfig struct {
	// Name identifies the provider. It is used in Kubernetes object names
	// and, followed by ':', as the prefix of user and group names from this
	// provider, so it must be a valid DNS subdomain name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self != 'system'",message="'system' is reserved and cannot be used as an OIDC provider name"
	Name string `json:"name"`

	// Issuer is the issuer URL of the provider, of at most 2048 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s/$.?#].[^\s]*$`
	Issuer string `json:"issuer"`

	// ClientID is the OAuth client ID registered with the provider, of at
	// most 256 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ClientID string `json:"clientID"`

	// GroupsClaim is the token claim that holds the user's groups, of at
	// most 256 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:default=groups
	GroupsClaim string `json:"groupsClaim,omitempty"`

	// GroupsPrefix is put in front of every group name in role bindings, to
	// keep the provider's groups apart from built-in ones. When empty, the
	// provider name followed by ':' is used. A missing trailing ':' is added.
	// At most 256 characters.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	GroupsPrefix string `json:"groupsPrefix,omitempty"`

	// UsernameClaim is the token claim that holds the user name, of at most
	// 256 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:default=sub
	UsernameClaim string `json:"usernameClaim,omitempty"`

	// UsernamePrefix is put in front of every user name in role bindings, to
	// keep the provider's users apart from built-in ones. When empty, the
	// provider name followed by ':' is used. A missing trailing ':' is added.
	// At most 256 characters.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	UsernamePrefix string `json:"usernamePrefix,omitempty"`

	// ExtraScopes are requested from the provider in addition to "openid":
	// at most 32, each of at most 256 characters.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	ExtraScopes []string `json:"extraScopes,omitempty"`

	// RoleBindings bind users and groups of this provider to roles. The
	// prefixes are added to the subjects' names automatically, so subjects
	// name users and groups as the provider knows them. At most 64.
	// +required
	// +kubebuilder:validation:MaxItems=64
	RoleBindings []RoleBindings `json:"roleBindings"`
}

// RoleBindings binds a set of subjects to a set of roles.
type RoleBindings struct {
	// Subjects are the users, groups or service accounts to bind, at most
	// 1024 (a RoleBinding lists them all).
	// +required
	// +kubebuilder:validation:MaxItems=1024
	Subjects []rbacv1.Subject `json:"subjects"`

	// RoleRefs are the Roles and ClusterRoles the subjects are bound to.
	// Roles that do not exist make the binding ineffective, not invalid.
	// At most 64: each becomes a RoleBinding or ClusterRoleBinding.
	// +required
	// +kubebuilder:validation:MaxItems=64
	RoleRefs []RoleRef `json:"roleRefs"`
}

// RoleKind says whether a RoleRef names a Role or a ClusterRole.
// +kubebuilder:validation:Enum=Role;ClusterRole
type RoleKind string

// The kinds a RoleRef can name.
const (
	// RoleKindRole names a namespaced Role.
	RoleKindRole RoleKind = "Role"
	// RoleKindClusterRole names a ClusterRole.
	RoleKindClusterRole RoleKind = "ClusterRole"
)

// RoleRef names a Role or ClusterRole to bind subjects to.
// +kubebuilder:validation:XValidation:rule="self.kind != 'Role' || (has(self.namespace) && size(self.namespace) > 0)",message="namespace must be set when kind is Role"
// +kubebuilder:validation:XValidation:rule="self.kind != 'ClusterRole' || !has(self.namespace) || size(self.namespace) == 0",message="namespace must not be set when kind is ClusterRole"
type RoleRef struct {
	// Name is the name of the Role or ClusterRole, of at most 253
	// characters, an object name's.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace is the namespace of the Role. It must be set for a Role and
	// must be empty for a ClusterRole. At most 63 characters, a namespace
	// name's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// Kind is Role or ClusterRole.
	// +required
	Kind RoleKind `json:"kind"`
}
