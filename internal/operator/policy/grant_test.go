package policy_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// clusterRoles is the target cluster's ClusterRoles for CheckToken, which
// reads the roles that roleRefs name: a pure unit, so a map.
type clusterRoles map[string]*rbacv1.ClusterRole

func (m clusterRoles) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	role, ok := obj.(*rbacv1.ClusterRole)
	if !ok || m[key.Name] == nil {
		return apierrors.NewNotFound(rbacv1.Resource("clusterroles"), key.Name)
	}
	m[key.Name].DeepCopyInto(role)
	return nil
}

func (m clusterRoles) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return nil
}

// targetRoles are the ClusterRoles of a Kubernetes cluster that the grant
// tests name: cluster-admin (all of it), admin (aggregated) and a role
// within the MCP ceiling.
var targetRoles = clusterRoles{
	"cluster-admin": {
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"},
		Rules:      []rbacv1.PolicyRule{rule(l("*"), l("*"), l("*")), {NonResourceURLs: l("*"), Verbs: l("*")}},
	},
	"admin": {
		ObjectMeta:      metav1.ObjectMeta{Name: "admin"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}}},
	},
	"configmap-reader": {
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules:      []rbacv1.PolicyRule{rule(l(""), l("configmaps"), l("get", "list"))},
	},
}

// ceilings returns the ceilings of pol on a cluster of the scopes, as the
// AccessRequest controller builds them.
func ceilings(pol providerv1alpha1.AccessPolicy, scopes ...policy.Scope) []policy.Ceiling {
	out := make([]policy.Ceiling, 0, len(scopes))
	for _, s := range scopes {
		extra, roleRefs := policy.Grants(pol, s)
		out = append(out, policy.NewCeiling(s, ownSample, extra, policy.DefaultAccessNamespace).WithRoleRefs(roleRefs))
	}
	return out
}

// TestGrant is issue #34: what openMCP's service-provider-template asks
// for (*/*/* and a roleRef to cluster-admin on the MCP and the workload
// cluster, all CRDs on onboarding) is refused by default and granted when
// the platform operator names it in spec.accessPolicy, and a grant in one
// place widens nothing else.
func TestGrant(t *testing.T) {
	clusterAdmin := common.RoleRef{Kind: common.RoleKindClusterRole, Name: "cluster-admin"}
	allCRDs := rule(l("apiextensions.k8s.io"), l("customresourcedefinitions"), l("*"))
	// The template's MCP and workload token (cmd/service-provider-template).
	template := &clustersv1alpha1.TokenConfig{
		Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: everythingRules()}},
		RoleRefs:    []common.RoleRef{clusterAdmin},
	}
	templateGrant := providerv1alpha1.AccessPolicy{
		Onboarding: []rbacv1.PolicyRule{allCRDs},
		MCP:        everythingRules(),
		Workload:   everythingRules(),
		RoleRefs:   &providerv1alpha1.RoleRefGrants{MCP: l("cluster-admin"), Workload: l("cluster-admin")},
	}
	roleRefOnly := func(refs ...common.RoleRef) *clustersv1alpha1.TokenConfig {
		return &clustersv1alpha1.TokenConfig{RoleRefs: refs}
	}
	namespaced := func(ns string, rules ...rbacv1.PolicyRule) *clustersv1alpha1.TokenConfig {
		return &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Namespace: ns, Rules: rules}}}
	}

	cases := map[string]struct {
		reason string
		policy providerv1alpha1.AccessPolicy
		scopes []policy.Scope
		token  *clustersv1alpha1.TokenConfig
		want   string // the rule that denies, "" for granted
		detail string // part of the message
	}{
		"ClusterAdminRefusedByDefault": {
			reason: "least privilege stays the default",
			scopes: []policy.Scope{policy.ScopeMCP}, token: roleRefOnly(clusterAdmin),
			want: policy.RuleNoAdminRoles, detail: "spec.accessPolicy.roleRefs.mcp",
		},
		"ClusterAdminNotGrantedByRules": {
			reason: "*/*/* in the extra rules does not make an admin role grantable: it must be named",
			policy: providerv1alpha1.AccessPolicy{MCP: everythingRules()},
			scopes: []policy.Scope{policy.ScopeMCP}, token: roleRefOnly(clusterAdmin),
			want: policy.RuleNoAdminRoles, detail: "roleRef ClusterRole cluster-admin",
		},
		"ClusterAdminGranted": {
			reason: "named in roleRefs.mcp",
			policy: providerv1alpha1.AccessPolicy{RoleRefs: &providerv1alpha1.RoleRefGrants{MCP: l("cluster-admin")}},
			scopes: []policy.Scope{policy.ScopeMCP}, token: roleRefOnly(clusterAdmin),
		},
		"ClusterAdminGrantedElsewhere": {
			reason: "a grant on workload clusters is none on the MCP",
			policy: providerv1alpha1.AccessPolicy{RoleRefs: &providerv1alpha1.RoleRefGrants{Workload: l("cluster-admin")}},
			scopes: []policy.Scope{policy.ScopeMCP}, token: roleRefOnly(clusterAdmin),
			want: policy.RuleNoAdminRoles, detail: "roleRefs.mcp",
		},
		"OtherAdminRoleNotGranted": {
			reason: "naming cluster-admin grants neither admin nor edit",
			policy: providerv1alpha1.AccessPolicy{RoleRefs: &providerv1alpha1.RoleRefGrants{MCP: l("cluster-admin")}},
			scopes: []policy.Scope{policy.ScopeMCP}, token: roleRefOnly(common.RoleRef{Kind: common.RoleKindClusterRole, Name: "admin"}),
			want: policy.RuleNoAdminRoles, detail: "ClusterRole admin",
		},
		"AggregatedAdminGranted": {
			reason: "a named role is bound as it is, aggregated or not",
			policy: providerv1alpha1.AccessPolicy{RoleRefs: &providerv1alpha1.RoleRefGrants{MCP: l("admin")}},
			scopes: []policy.Scope{policy.ScopeMCP}, token: roleRefOnly(common.RoleRef{Kind: common.RoleKindClusterRole, Name: "admin"}),
		},
		"CoveredRoleRefNeedsNoGrant": {
			reason: "a role within the ceiling is granted as before (RBAC's own escalation rule)",
			scopes: []policy.Scope{policy.ScopeMCP}, token: roleRefOnly(common.RoleRef{Kind: common.RoleKindClusterRole, Name: "configmap-reader"}),
		},
		"SharedClusterNeedsBothScopes": {
			reason: "a cluster serving onboarding and workload needs the role named for both",
			policy: providerv1alpha1.AccessPolicy{RoleRefs: &providerv1alpha1.RoleRefGrants{Workload: l("cluster-admin")}},
			scopes: []policy.Scope{policy.ScopeOnboarding, policy.ScopeWorkload}, token: roleRefOnly(clusterAdmin),
			want: policy.RuleNoAdminRoles, detail: "roleRefs.onboarding",
		},
		"SharedClusterBothScopes": {
			policy: providerv1alpha1.AccessPolicy{RoleRefs: &providerv1alpha1.RoleRefGrants{Onboarding: l("cluster-admin"), Workload: l("cluster-admin")}},
			scopes: []policy.Scope{policy.ScopeOnboarding, policy.ScopeWorkload}, token: roleRefOnly(clusterAdmin),
		},
		"TemplateMCPDefault": {
			scopes: []policy.Scope{policy.ScopeMCP}, token: template,
			want: policy.RuleCeiling, detail: "permissions[0]: * */*",
		},
		"TemplateMCPGrant": {
			policy: templateGrant, scopes: []policy.Scope{policy.ScopeMCP}, token: template,
		},
		"TemplateWorkloadDefault": {
			scopes: []policy.Scope{policy.ScopeWorkload}, token: template,
			want: policy.RuleCeiling, detail: "not allowed on workload clusters",
		},
		"TemplateWorkloadRulesOnly": {
			reason: "the rules granted, the roleRef not",
			policy: providerv1alpha1.AccessPolicy{Workload: everythingRules()},
			scopes: []policy.Scope{policy.ScopeWorkload}, token: template,
			want: policy.RuleNoAdminRoles, detail: "roleRefs.workload",
		},
		"TemplateWorkloadGrant": {
			policy: templateGrant, scopes: []policy.Scope{policy.ScopeWorkload}, token: template,
		},
		"TemplateGrantNotOnOnboarding": {
			reason: "the template's grant gives nothing but CRDs on onboarding",
			policy: templateGrant, scopes: []policy.Scope{policy.ScopeOnboarding}, token: template,
			want: policy.RuleCeiling, detail: "not allowed on onboarding clusters",
		},
		"TemplateInitDefault": {
			scopes: []policy.Scope{policy.ScopeOnboarding}, token: &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{allCRDs}}}},
			want: policy.RuleCeiling, detail: "customresourcedefinitions",
		},
		"TemplateInitGrant": {
			policy: templateGrant,
			scopes: []policy.Scope{policy.ScopeOnboarding}, token: &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{allCRDs}}}},
		},
		"NamespacedEverythingDefault": {
			scopes: []policy.Scope{policy.ScopeWorkload}, token: namespaced("tenant-a", everythingRules()...),
			want: policy.RuleCeiling, detail: "* */*",
		},
		"NamespacedEverythingGrant": {
			reason: "the extra rules hold for Roles as for ClusterRoles",
			policy: templateGrant, scopes: []policy.Scope{policy.ScopeWorkload}, token: namespaced("tenant-a", everythingRules()...),
		},
		"NamespacedGrantNotInSystemNamespaces": {
			reason: "no grant opens the access namespace or kube-system",
			policy: templateGrant, scopes: []policy.Scope{policy.ScopeWorkload}, token: namespaced("kube-system", everythingRules()...),
			want: policy.RuleProtectedNamespace, detail: "kube-system",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := policy.CheckToken(t.Context(), targetRoles, ceilings(tc.policy, tc.scopes...), tc.token)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && v != nil:
				t.Errorf("%s: denied: %v, want granted", tc.reason, v)
			case tc.want != "" && v == nil:
				t.Errorf("%s: granted, want denied by %q", tc.reason, tc.want)
			case tc.want != "" && v.Rule != tc.want:
				t.Errorf("%s: denied by %q (%v), want %q", tc.reason, v.Rule, v, tc.want)
			case v != nil && !strings.Contains(v.Error(), tc.detail):
				t.Errorf("message %q does not contain %q", v.Error(), tc.detail)
			}
		})
	}
}

func everythingRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{rule(l("*"), l("*"), l("*"))}
}
