package policy

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/component-helpers/auth/rbac/validation"

	controlplanev2alpha1 "github.com/marketplane/marketplane/api/controlplane/v2alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// Scope is the kind of cluster an AccessRequest is for; it selects the
// ceiling of what may be requested there.
type Scope string

// The scopes of the access policy.
const (
	// ScopeOnboarding is the onboarding cluster, shared by every tenant and
	// provider.
	ScopeOnboarding Scope = "onboarding"
	// ScopeMCP is a cluster of one tenant (a ManagedControlPlane's) or one
	// the provider holds exclusively.
	ScopeMCP Scope = "mcp"
	// ScopeWorkload is a shared workload cluster (any shared purpose other
	// than onboarding and platform).
	ScopeWorkload Scope = "workload"
)

// DefaultAccessNamespace is the namespace on every target cluster that
// holds the ServiceAccounts of AccessRequests (access.AccessNamespace). No
// permission may be requested in it: a Role there could mint tokens of the
// other requests' ServiceAccounts.
const DefaultAccessNamespace = "marketplane-access"

// SystemNamespaces are the namespaces of a shared workload cluster in which
// no provider may request a Role: Kubernetes' own and default.
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "default"}

// Names of the policy's rules, as they appear in a Violation.
const (
	RuleNoPlatform         = "no access to the platform cluster"
	RuleMCPThroughRequest  = "MCP and exclusive clusters only through their ClusterRequest"
	RuleRequestRefScope    = "requestRef only to the own namespace or a tenant's MCP"
	RuleTenantsOnly        = "MCP access only to tenants' ManagedControlPlanes"
	RuleNoAdminRoles       = "no Kubernetes admin roles"
	RuleCeiling            = "permissions within the ceiling"
	RuleRoleRefCeiling     = "roleRefs within the ceiling"
	RuleProtectedNamespace = "no permissions in protected namespaces"
	RuleTenantNamespaces   = "no namespaces created on the onboarding cluster"
	RuleNoPlatformRequest  = "no ClusterRequests for the platform cluster"
	RuleMaxClusterRequests = "at most maxClusterRequests ClusterRequests"
	RuleMaxExclusive       = "at most maxExclusiveClusters exclusive clusters"
	RuleRequestOwner       = "requests in MCP namespaces name their ServiceProvider"
	RuleNamespaceOwner     = "Roles only in the provider's own namespaces"
)

// Violation says which rule of the access policy a request breaks, and how.
// Its Error is the message of the request's Ready condition.
type Violation struct {
	// Rule is one of the Rule* names.
	Rule string
	// Detail names what in the request breaks the rule.
	Detail string
}

func (v *Violation) Error() string { return fmt.Sprintf("rule %q: %s", v.Rule, v.Detail) }

func violation(rule, format string, args ...any) *Violation {
	return &Violation{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// Verb sets of the ceilings. None holds "*", escalate, bind or impersonate:
// RBAC's escalation prevention then keeps a token that may write roles and
// bindings from granting more than it holds itself.
var (
	readVerbs   = []string{"get", "list", "watch"}
	writeVerbs  = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	eventVerbs  = []string{"create", "patch", "update"}
	crdNameVerb = []string{"get", "update", "patch", "delete"}
)

const crdResource = "customresourcedefinitions"

// domainServiceRules are the namespaced kinds installing a domain service
// needs: its configuration, credentials, workloads, network and
// disruption policies, leases, events and namespaced RBAC. Pods are only
// read; tokens (serviceaccounts/token), exec and the like are not there.
func domainServiceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "services", "serviceaccounts", "endpoints", "persistentvolumeclaims"}, Verbs: writeVerbs},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: readVerbs},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: append(slices.Clone(readVerbs), eventVerbs...)},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: writeVerbs},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: readVerbs},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: writeVerbs},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}, Verbs: writeVerbs},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies", "ingresses"}, Verbs: writeVerbs},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: writeVerbs},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: writeVerbs},
	}
}

// crdRules let a provider read and create CRDs; updating and deleting one
// needs its name, which ownedCRDRules grants for the groups it may own.
func crdRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{crdResource}, Verbs: []string{"get", "list", "watch", "create"}}}
}

// baseRules are the default ceiling of scope, without the provider's own
// groups: cluster-wide (for ClusterRoles) and in a namespace (for Roles).
func baseRules(scope Scope) (cluster, namespaced []rbacv1.PolicyRule) {
	switch scope {
	case ScopeOnboarding:
		cluster = append(crdRules(),
			rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: eventVerbs},
			rbacv1.PolicyRule{APIGroups: []string{corev2alpha1.GroupName}, Resources: []string{"managedcontrolplanes"}, Verbs: readVerbs},
			// openMCP's current name of the same API (issue #11).
			rbacv1.PolicyRule{APIGroups: []string{controlplanev2alpha1.GroupName}, Resources: []string{"controlplanes"}, Verbs: readVerbs},
		)
		return cluster, cluster
	case ScopeMCP:
		cluster = append(crdRules(), domainServiceRules()...)
		cluster = append(cluster,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: writeVerbs},
			rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: writeVerbs},
			rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: writeVerbs},
		)
		return cluster, cluster
	case ScopeWorkload:
		cluster = []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: readVerbs},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: readVerbs},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingressclasses"}, Verbs: readVerbs},
			{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: readVerbs},
			{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{crdResource}, Verbs: readVerbs},
		}
		return cluster, domainServiceRules()
	}
	return nil, nil
}

// Ceiling is what one provider may request on one kind of cluster: the
// default rules of the scope, every rule on the API groups it may own, and
// the platform operator's extra rules (spec.accessPolicy).
type Ceiling struct {
	scope Scope
	// own reports whether the provider may own an API group.
	own func(group string) bool
	// cluster holds for ClusterRoles, namespaced for Roles.
	cluster, namespaced []rbacv1.PolicyRule
	// protected are namespaces in which no Role may be requested.
	protected []string
	// roleRefs are the ClusterRoles the platform operator lets the
	// provider bind here whatever their rules
	// (spec.accessPolicy.roleRefs).
	roleRefs []string
}

// NewCeiling returns the ceiling of scope for a provider that may own the
// groups own reports, with the platform operator's extra rules, on clusters
// whose access namespace is accessNamespace.
func NewCeiling(scope Scope, own func(group string) bool, extra []rbacv1.PolicyRule, accessNamespace string) Ceiling {
	cluster, namespaced := baseRules(scope)
	c := Ceiling{
		scope:      scope,
		own:        own,
		cluster:    slices.Concat(cluster, extra),
		namespaced: slices.Concat(namespaced, extra),
		protected:  []string{accessNamespace},
	}
	if scope == ScopeWorkload {
		c.protected = append(c.protected, SystemNamespaces...)
	}
	return c
}

// WithRoleRefs returns the ceiling with the ClusterRoles names granted as
// roleRefs whatever their rules: the platform operator's explicit grant
// (spec.accessPolicy.roleRefs), the only way to a Kubernetes admin role or
// an aggregated ClusterRole.
func (c Ceiling) WithRoleRefs(names []string) Ceiling {
	c.roleRefs = slices.Clone(names)
	return c
}

// Scope returns the ceiling's scope.
func (c Ceiling) Scope() Scope { return c.scope }

// GrantsClusterRole reports whether the platform operator named the
// ClusterRole name in this scope's spec.accessPolicy.roleRefs.
func (c Ceiling) GrantsClusterRole(name string) bool { return slices.Contains(c.roleRefs, name) }

// ownable reports whether rules on group may be wildcards: the provider may
// own it, and it is not a Kubernetes group (core, no dot, *.k8s.io), which
// no ownership, not even one the platform operator grants, turns into "all
// of it" — those need explicit extra rules.
func (c Ceiling) ownable(group string) bool {
	if group == rbacv1.APIGroupAll || !strings.Contains(group, ".") || group == "k8s.io" || strings.HasSuffix(group, ".k8s.io") {
		return false
	}
	return c.own != nil && c.own(group)
}

// ownedRules are the rules the ceiling adds for what is requested: every
// rule on the groups of requested that the provider may own, and update,
// patch and delete of CRDs named in requested whose group it may own (on
// onboarding and MCP clusters).
func (c Ceiling) ownedRules(requested []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var groups, crds []string
	for _, r := range requested {
		for _, g := range r.APIGroups {
			if !slices.Contains(groups, g) && c.ownable(g) {
				groups = append(groups, g)
			}
		}
		if c.scope == ScopeWorkload || !slices.Contains(r.APIGroups, apiextensionsv1.GroupName) {
			continue
		}
		for _, name := range r.ResourceNames {
			// A CRD is named <plural>.<group>.
			if _, group, ok := strings.Cut(name, "."); ok && c.ownable(group) && !slices.Contains(crds, name) {
				crds = append(crds, name)
			}
		}
	}
	var out []rbacv1.PolicyRule
	if len(groups) > 0 {
		out = append(out, rbacv1.PolicyRule{APIGroups: groups, Resources: []string{rbacv1.ResourceAll}, Verbs: []string{rbacv1.VerbAll}})
	}
	if len(crds) > 0 {
		out = append(out, rbacv1.PolicyRule{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{crdResource}, ResourceNames: crds, Verbs: crdNameVerb})
	}
	return out
}

// Check reports the first part of rules, the rules of a Role in namespace
// (a ClusterRole when namespace is empty), that is outside the ceiling;
// what names the rules in the message, e.g. "permissions[0]".
func (c Ceiling) Check(what, namespace string, rules []rbacv1.PolicyRule, rule string) *Violation {
	if namespace != "" && slices.Contains(c.protected, namespace) {
		return violation(RuleProtectedNamespace, "%s: namespace %s is protected on %s clusters", what, namespace, c.scope)
	}
	owner := c.cluster
	if namespace != "" {
		owner = c.namespaced
	}
	owner = append(slices.Clone(owner), c.ownedRules(rules)...)
	if ok, uncovered := validation.Covers(owner, rules); !ok {
		return violation(rule, "%s: %s not allowed on %s clusters", what, describeRules(uncovered), c.scope)
	}
	return nil
}

// AdminRole reports whether a roleRef to the ClusterRole name is refused
// whatever its rules are, unless the platform operator names it in
// spec.accessPolicy.roleRefs: cluster-admin, admin, edit and the system:
// roles are Kubernetes' own and can change with Kubernetes.
func AdminRole(name string) bool {
	switch name {
	case "cluster-admin", "admin", "edit":
		return true
	}
	return strings.HasPrefix(name, "system:")
}

// describeRules renders broken-down rules for a message, at most five.
func describeRules(rules []rbacv1.PolicyRule) string {
	const most = 5
	parts := make([]string, 0, min(len(rules), most))
	for i, r := range rules {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(rules)-most))
			break
		}
		parts = append(parts, describeRule(r))
	}
	return strings.Join(parts, ", ")
}

func describeRule(r rbacv1.PolicyRule) string {
	if len(r.NonResourceURLs) > 0 {
		return fmt.Sprintf("%s %s", strings.Join(r.Verbs, ","), strings.Join(r.NonResourceURLs, ","))
	}
	groups := make([]string, len(r.APIGroups))
	for i, g := range r.APIGroups {
		if g == "" {
			g = "core"
		}
		groups[i] = g
	}
	s := fmt.Sprintf("%s %s/%s", strings.Join(r.Verbs, ","), strings.Join(groups, ","), strings.Join(r.Resources, ","))
	if len(r.ResourceNames) > 0 {
		s += " named " + strings.Join(r.ResourceNames, ",")
	}
	return s
}
