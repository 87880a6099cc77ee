package policy_test

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/marketplane/marketplane/internal/operator/policy"
)

// ownSample is a provider that may own the sample groups, and (as a
// platform operator could grant it by mistake) the core group.
func ownSample(group string) bool {
	return group == "" || strings.HasSuffix(group, "sample.services.openmcp.cloud")
}

func rule(groups, resources, verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
}

func l(s ...string) []string { return s }

func TestCeilingCheck(t *testing.T) {
	const sampleCRD = "samples.sample.services.openmcp.cloud"
	cases := map[string]struct {
		reason    string
		scope     policy.Scope
		extra     []rbacv1.PolicyRule
		namespace string
		rules     []rbacv1.PolicyRule
		// want is the rule of the violation, or "" when allowed.
		want string
	}{
		"OnboardingInit": {
			reason: "providerapp's init request: install CRDs, update only its own by name",
			scope:  policy.ScopeOnboarding,
			rules: []rbacv1.PolicyRule{
				rule(l("apiextensions.k8s.io"), l("customresourcedefinitions"), l("get", "list", "watch", "create")),
				rule(l("apiextensions.k8s.io"), l("customresourcedefinitions"), l("update", "patch"), sampleCRD),
			},
		},
		"OnboardingRun": {
			reason: "providerapp's default run request: everything on its groups, events, reading MCPs",
			scope:  policy.ScopeOnboarding,
			rules: []rbacv1.PolicyRule{
				rule(l("sample.services.openmcp.cloud"), l("*"), l("*")),
				rule(l("", "events.k8s.io"), l("events"), l("create", "patch", "update")),
				rule(l("core.openmcp.cloud"), l("managedcontrolplanes"), l("get", "list", "watch")),
			},
		},
		"OnboardingReadControlPlanes": {
			reason: "openMCP's current name of the MCP API is read like managedcontrolplanes (issue #11)",
			scope:  policy.ScopeOnboarding,
			rules:  []rbacv1.PolicyRule{rule(l("core.open-control-plane.io"), l("controlplanes"), l("get", "list", "watch"))},
		},
		"OnboardingWriteControlPlanes": {
			reason: "tenants write their ControlPlanes, providers only read them",
			scope:  policy.ScopeOnboarding,
			rules:  []rbacv1.PolicyRule{rule(l("core.open-control-plane.io"), l("controlplanes"), l("update"))},
			want:   policy.RuleCeiling,
		},
		"OnboardingCRDUpdateWithoutName": {
			reason: "updating any CRD would let it rewrite other providers' APIs",
			scope:  policy.ScopeOnboarding,
			rules:  []rbacv1.PolicyRule{rule(l("apiextensions.k8s.io"), l("customresourcedefinitions"), l("update"))},
			want:   policy.RuleCeiling,
		},
		"OnboardingCRDUpdateOtherGroup": {
			reason: "a CRD of a group it may not own",
			scope:  policy.ScopeOnboarding,
			rules:  []rbacv1.PolicyRule{rule(l("apiextensions.k8s.io"), l("customresourcedefinitions"), l("patch"), "managedcontrolplanes.core.openmcp.cloud")},
			want:   policy.RuleCeiling,
		},
		"OnboardingEverything": {
			reason: "*/*/* is never within a ceiling",
			scope:  policy.ScopeOnboarding,
			rules:  []rbacv1.PolicyRule{rule(l("*"), l("*"), l("*"))},
			want:   policy.RuleCeiling,
		},
		"OnboardingSecrets": {
			reason: "tenant Secrets on the onboarding cluster (admin kubeconfigs of MCPs)",
			scope:  policy.ScopeOnboarding,
			rules:  []rbacv1.PolicyRule{rule(l(""), l("secrets"), l("get"))},
			want:   policy.RuleCeiling,
		},
		"CoreGroupNeverOwned": {
			reason: "even if ownership says yes, the core group is no wildcard",
			scope:  policy.ScopeOnboarding,
			rules:  []rbacv1.PolicyRule{rule(l(""), l("*"), l("*"))},
			want:   policy.RuleCeiling,
		},
		"OnboardingExtra": {
			reason: "spec.accessPolicy.onboarding widens the ceiling",
			scope:  policy.ScopeOnboarding,
			extra:  []rbacv1.PolicyRule{rule(l(""), l("secrets"), l("create", "patch", "delete"))},
			rules:  []rbacv1.PolicyRule{rule(l(""), l("secrets"), l("create", "delete"))},
		},
		"OnboardingAccessNamespace": {
			reason: "a Role in the access namespace could mint other requests' tokens",
			scope:  policy.ScopeOnboarding, namespace: policy.DefaultAccessNamespace,
			rules: []rbacv1.PolicyRule{rule(l("sample.services.openmcp.cloud"), l("*"), l("get"))},
			want:  policy.RuleProtectedNamespace,
		},
		"MCPSample": {
			reason: "the sample provider's MCP permissions",
			scope:  policy.ScopeMCP,
			rules: []rbacv1.PolicyRule{
				rule(l("apiextensions.k8s.io"), l("customresourcedefinitions"), l("create")),
				rule(l("apiextensions.k8s.io"), l("customresourcedefinitions"), l("get", "update", "patch", "delete"), "sampleobjects.domain.sample.services.openmcp.cloud"),
				rule(l("domain.sample.services.openmcp.cloud"), l("sampleobjects"), l("list")),
			},
		},
		"MCPDomainService": {
			reason: "installing a domain service: namespaces, secrets, deployments, RBAC, webhooks",
			scope:  policy.ScopeMCP,
			rules: []rbacv1.PolicyRule{
				rule(l(""), l("namespaces", "secrets", "configmaps", "serviceaccounts", "services"), l("get", "create", "update", "delete")),
				rule(l("apps"), l("deployments"), l("get", "create", "patch")),
				rule(l("rbac.authorization.k8s.io"), l("roles", "rolebindings", "clusterroles", "clusterrolebindings"), l("create")),
				rule(l("admissionregistration.k8s.io"), l("validatingwebhookconfigurations"), l("create", "delete")),
			},
		},
		"MCPTokens": {
			reason: "minting tokens of the MCP's ServiceAccounts",
			scope:  policy.ScopeMCP,
			rules:  []rbacv1.PolicyRule{rule(l(""), l("serviceaccounts/token"), l("create"))},
			want:   policy.RuleCeiling,
		},
		"MCPEscalate": {
			reason: "escalate and bind would lift RBAC's escalation prevention",
			scope:  policy.ScopeMCP,
			rules:  []rbacv1.PolicyRule{rule(l("rbac.authorization.k8s.io"), l("clusterroles"), l("escalate", "bind"))},
			want:   policy.RuleCeiling,
		},
		"MCPEverything": {
			scope: policy.ScopeMCP,
			rules: []rbacv1.PolicyRule{rule(l("*"), l("*"), l("*"))},
			want:  policy.RuleCeiling,
		},
		"WorkloadNamespaces": {
			scope: policy.ScopeWorkload,
			rules: []rbacv1.PolicyRule{rule(l(""), l("namespaces"), l("get", "create", "delete"))},
		},
		"WorkloadNamespaceUpdate": {
			reason: "relabelling other tenants' namespaces",
			scope:  policy.ScopeWorkload,
			rules:  []rbacv1.PolicyRule{rule(l(""), l("namespaces"), l("update", "patch"))},
			want:   policy.RuleCeiling,
		},
		"WorkloadNamespaceUpdateExtra": {
			scope: policy.ScopeWorkload,
			extra: []rbacv1.PolicyRule{rule(l(""), l("namespaces"), l("update", "patch"))},
			rules: []rbacv1.PolicyRule{rule(l(""), l("namespaces"), l("update", "patch"))},
		},
		"WorkloadClusterWideSecrets": {
			reason: "ClusterRoles on a shared cluster only read harmless kinds",
			scope:  policy.ScopeWorkload,
			rules:  []rbacv1.PolicyRule{rule(l(""), l("secrets"), l("list"))},
			want:   policy.RuleCeiling,
		},
		"WorkloadRoleInNamespace": {
			scope: policy.ScopeWorkload, namespace: "sample-1",
			rules: []rbacv1.PolicyRule{rule(l(""), l("secrets", "configmaps"), l("get", "create")), rule(l("apps"), l("deployments"), l("create"))},
		},
		"WorkloadRoleInKubeSystem": {
			scope: policy.ScopeWorkload, namespace: "kube-system",
			rules: []rbacv1.PolicyRule{rule(l(""), l("configmaps"), l("get"))},
			want:  policy.RuleProtectedNamespace,
		},
		"WorkloadNonResourceURL": {
			scope: policy.ScopeWorkload,
			rules: []rbacv1.PolicyRule{{NonResourceURLs: l("/metrics"), Verbs: l("get")}},
			want:  policy.RuleCeiling,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := policy.NewCeiling(tc.scope, ownSample, tc.extra, policy.DefaultAccessNamespace)
			v := c.Check("permissions[0]", tc.namespace, tc.rules, policy.RuleCeiling)
			switch {
			case tc.want == "" && v != nil:
				t.Errorf("%s: denied: %v, want allowed", tc.reason, v)
			case tc.want != "" && v == nil:
				t.Errorf("%s: allowed, want denied by %q", tc.reason, tc.want)
			case tc.want != "" && v.Rule != tc.want:
				t.Errorf("%s: denied by %q (%v), want %q", tc.reason, v.Rule, v, tc.want)
			case v != nil && !strings.Contains(v.Error(), "rule \""+tc.want+"\": permissions[0]"):
				t.Errorf("message %q does not name the rule and the permission", v.Error())
			}
		})
	}
}

func TestAdminRole(t *testing.T) {
	for name, want := range map[string]bool{
		"cluster-admin": true, "admin": true, "edit": true, "system:controller:namespace-controller": true,
		"view": false, "pod-lister": false, "marketplane:sp-x": false,
	} {
		if got := policy.AdminRole(name); got != want {
			t.Errorf("AdminRole(%q) = %v, want %v", name, got, want)
		}
	}
}
