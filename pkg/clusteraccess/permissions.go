package clusteraccess

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
)

// Permissions is what a provider asks to be allowed on a cluster. The
// operator creates the roles and bindings for the AccessRequest's
// ServiceAccount on the target cluster.
type Permissions struct {
	// Rules are granted cluster-wide, as one ClusterRole.
	Rules []rbacv1.PolicyRule
	// Roles are further roles, for example a Role in one namespace
	// (clustersv1alpha1.PermissionsRequest with Namespace set). Leave their
	// Name empty: a named role belongs to one AccessRequest, so a second
	// request for the same name (another object's MCP access on a shared
	// cluster) would be denied with RoleConflict.
	Roles []clustersv1alpha1.PermissionsRequest
	// RoleRefs bind existing Roles and ClusterRoles, such as ClusterAdmin.
	RoleRefs []common.RoleRef
}

// ClusterAdmin refers to the cluster-admin ClusterRole. Asking for it is a
// deliberate choice; prefer Rules that name what the provider does.
var ClusterAdmin = common.RoleRef{Name: "cluster-admin", Kind: common.RoleKindClusterRole}

// token returns the token access spec of an AccessRequest for p.
func (p Permissions) token() *clustersv1alpha1.TokenConfig {
	t := &clustersv1alpha1.TokenConfig{}
	if len(p.Rules) > 0 {
		t.Permissions = append(t.Permissions, clustersv1alpha1.PermissionsRequest{Rules: deepCopyRules(p.Rules)})
	}
	for _, r := range p.Roles {
		t.Permissions = append(t.Permissions, *r.DeepCopy())
	}
	t.RoleRefs = slices.Clone(p.RoleRefs)
	return t
}

func deepCopyRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i := range rules {
		rules[i].DeepCopyInto(&out[i])
	}
	return out
}
