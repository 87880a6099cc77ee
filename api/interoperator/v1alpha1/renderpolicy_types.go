/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import "slices"

// RenderPolicyAll matches everything when it stands in a RenderPolicy's
// plans, namespaces, clusterRoles or a kind's group and kind.
const RenderPolicyAll = "*"

// DefaultBindableClusterRoles are the ClusterRoles that role bindings a plan
// renders may refer to without a grant: Kubernetes' user-facing roles, which
// a RoleBinding confines to its namespace. They aggregate rules from every
// ClusterRole labelled rbac.authorization.k8s.io/aggregate-to-<role>, which
// is why rendering such a ClusterRole needs a grant of clusterRoles "*".
var DefaultBindableClusterRoles = []string{"admin", "edit", "view"}

// RenderPolicy is a grant of the platform operator: it widens what the
// objects that the templates of some plans render, and the sources they
// name, may be. Without a grant, a plan may render only namespaced objects
// in the instance's own namespaces (its default namespace and Namespaces the
// instance renders and owns), Namespaces of its own, and role bindings to
// admin, edit or view; and its sources may name only objects of the
// instance. Plan authors cannot widen this: the ProviderConfig is the
// platform operator's.
type RenderPolicy struct {
	// plans are the ids (spec.id) of the SFPlans the grant is for; "*" is
	// every plan of the catalog.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:MinLength=1
	Plans []string `json:"plans"`
	// namespaces are namespaces, besides the instance's own, that the
	// plans may render objects into and read sources from; "*" is every
	// namespace. Objects of other instances stay out of reach as sources.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	Namespaces []string `json:"namespaces,omitempty"`
	// clusterScopedKinds are cluster-scoped kinds, besides the instance's
	// own Namespaces, that the plans may render and name as sources, for
	// example {group: apiextensions.k8s.io, kind: CustomResourceDefinition}.
	// +optional
	// +listType=atomic
	ClusterScopedKinds []RenderPolicyKind `json:"clusterScopedKinds,omitempty"`
	// clusterRoles are ClusterRoles, besides admin, edit and view, that role
	// bindings of the plans may refer to; "*" is every ClusterRole,
	// cluster-admin included, and also lets rendered ClusterRoles aggregate
	// into admin, edit and view.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	ClusterRoles []string `json:"clusterRoles,omitempty"`
}

// RenderPolicyKind names a kind by API group (empty for the core group) and
// kind; "*" matches every group or every kind.
type RenderPolicyKind struct {
	// group is the API group, "" for the core group.
	// +optional
	Group string `json:"group,omitempty"`
	// kind is the kind, for example ClusterRole.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// RenderGrants returns what the renderPolicies of spec grant the plan with
// the given id, merged. It is safe on a nil receiver.
func (s *ProviderConfigSpec) RenderGrants(planID string) RenderPolicy {
	var out RenderPolicy
	if s == nil {
		return out
	}
	for _, p := range s.RenderPolicies {
		if !slices.Contains(p.Plans, planID) && !slices.Contains(p.Plans, RenderPolicyAll) {
			continue
		}
		out.Plans = append(out.Plans, p.Plans...)
		out.Namespaces = append(out.Namespaces, p.Namespaces...)
		out.ClusterScopedKinds = append(out.ClusterScopedKinds, p.ClusterScopedKinds...)
		out.ClusterRoles = append(out.ClusterRoles, p.ClusterRoles...)
	}
	return out
}
