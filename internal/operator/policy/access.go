package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// ReasonPolicyViolation is the Ready reason of a request that the access
// policy denies; the condition's message is the Violation.
const ReasonPolicyViolation = "PolicyViolation"

// Defaults of spec.accessPolicy.
const (
	// DefaultMaxClusterRequests is how many ClusterRequests a provider may
	// have at once: onboarding init and run, a workload cluster, and room.
	DefaultMaxClusterRequests = 8
	// DefaultMaxExclusiveClusters is how many of them may ask for an
	// Exclusive cluster: none, each could be a new API server.
	DefaultMaxExclusiveClusters = 0
)

// The labels and the owner reference by which the provider operator marks
// a provider's namespace (internal/operator/provider, LabelProviderKind and
// ManagedByValue; not imported, since that package uses this one). Only
// the platform operator and the operator can write namespaces, so a
// provider cannot make another namespace look like one of its own.
const (
	providerKindLabel = "openmcp.cloud/provider-kind"
	managedByOperator = "marketplane-operator"
)

// Requester is the provider a request belongs to: the owner of the provider
// namespace the request lives in.
type Requester struct {
	// Kind is KindServiceProvider, KindClusterProvider or KindPlatformService.
	Kind string
	// Name is the provider object's name.
	Name string
	// Namespace is the provider namespace.
	Namespace string
	// Policy is the provider's spec.accessPolicy (zero when unset, or when
	// the provider object is gone).
	Policy providerv1alpha1.AccessPolicy
	// MCP is, for a request in the platform namespace of a
	// ManagedControlPlane (labelled with the provider, see RequesterFor),
	// that control plane's namespace and name on the onboarding cluster;
	// zero for a request in the provider's own namespace.
	MCP types.NamespacedName
}

func (r *Requester) String() string { return r.Kind + " " + r.Name }

// MaxClusterRequests returns the effective spec.accessPolicy.maxClusterRequests.
func (r *Requester) MaxClusterRequests() int {
	if p := r.Policy.MaxClusterRequests; p != nil {
		return int(*p)
	}
	return DefaultMaxClusterRequests
}

// MaxExclusiveClusters returns the effective
// spec.accessPolicy.maxExclusiveClusters.
func (r *Requester) MaxExclusiveClusters() int {
	if p := r.Policy.MaxExclusiveClusters; p != nil {
		return int(*p)
	}
	return DefaultMaxExclusiveClusters
}

// providerOfNamespace returns the provider whose namespace ns is, or nil.
func providerOfNamespace(ctx context.Context, c client.Reader, ns *corev1.Namespace) (*Requester, error) {
	namespace := ns.Name
	kind := ns.Labels[providerKindLabel]
	if ns.Labels[providerv1alpha1.ManagedByLabel] != managedByOperator || kind == "" {
		return nil, nil
	}
	var name string
	for _, ref := range ns.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == providerv1alpha1.GroupName && ref.Kind == kind {
			name = ref.Name
			break
		}
	}
	r := &Requester{Kind: kind, Name: name, Namespace: namespace}
	if name == "" {
		// Labelled as a provider namespace, but with no owner: police it
		// with the defaults rather than not at all.
		return r, nil
	}
	var obj client.Object
	var spec *providerv1alpha1.DeploymentSpec
	switch kind {
	case KindServiceProvider:
		o := &providerv1alpha1.ServiceProvider{}
		obj, spec = o, &o.Spec.DeploymentSpec
	case KindClusterProvider:
		o := &providerv1alpha1.ClusterProvider{}
		obj, spec = o, &o.Spec.DeploymentSpec
	case KindPlatformService:
		o := &providerv1alpha1.PlatformService{}
		obj, spec = o, &o.Spec.DeploymentSpec
	default:
		return r, nil
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return r, nil
		}
		return nil, fmt.Errorf("get %s %s: %w", kind, name, err)
	}
	if spec.AccessPolicy != nil {
		r.Policy = *spec.AccessPolicy.DeepCopy()
	}
	return r, nil
}

// WatchedNamespaces returns the provider namespaces of obj, a provider of
// kind, for a watch's map function: a failure is logged, and maps to none.
func WatchedNamespaces(ctx context.Context, c client.Reader, kind string, obj client.Object) []string {
	namespaces, err := NamespacesOf(ctx, c, kind, obj.GetName())
	if err != nil {
		logf.FromContext(ctx).Error(err, "Find provider namespaces", "kind", kind, "name", obj.GetName())
	}
	return namespaces
}

// NamespacesOf returns the provider namespaces of the provider kind/name:
// the one the operator created (more than one while a namespace of an
// earlier provider of the name is still being deleted) first, then any a
// platform operator registered for it with the same labels and an owner
// reference that is not a controller reference.
func NamespacesOf(ctx context.Context, c client.Reader, kind, name string) ([]string, error) {
	list := &corev1.NamespaceList{}
	if err := c.List(ctx, list, client.MatchingLabels{providerKindLabel: kind, providerv1alpha1.ManagedByLabel: managedByOperator}); err != nil {
		return nil, fmt.Errorf("list namespaces of %s %s: %w", kind, name, err)
	}
	var own, more []string
	for _, ns := range list.Items {
		for _, ref := range ns.OwnerReferences {
			if ref.Kind == kind && ref.Name == name {
				if ptr.Deref(ref.Controller, false) {
					own = append(own, ns.Name)
				} else {
					more = append(more, ns.Name)
				}
				break
			}
		}
	}
	// The namespace the operator created (it controls it) first: callers
	// that need one namespace of the provider take the first. Namespaces
	// a platform operator registered for the provider follow, sorted.
	slices.Sort(own)
	slices.Sort(more)
	return append(own, more...), nil
}

// held is 1 for a request that was granted a cluster, else 0.
func held(cr clustersv1alpha1.ClusterRequest) int {
	if cr.Status.Phase == clustersv1alpha1.RequestGranted {
		return 1
	}
	return 0
}

// CheckClusterRequest checks a ClusterRequest against the policy of the
// provider it belongs to (RequesterFor): no platform cluster; in a tenant's
// MCP namespace only when that MCP is a tenant of the provider; at most
// MaxClusterRequests of the provider's requests in the request's namespace
// (its own namespace and each tenant's MCP namespace count separately, so
// that a provider with many tenants can have a workload cluster for each);
// and at most MaxExclusiveClusters of all its requests, in every namespace
// together, for an exclusive purpose (each can be a new API server). The
// requests count granted ones first, then in the order they were created,
// so that a new request never takes the place of an older one. exclusive reports whether a
// purpose gets an Exclusive cluster. Requests outside provider and MCP
// namespaces, and an MCP's own, are not checked.
func (e *Enforcer) CheckClusterRequest(ctx context.Context, cr *clustersv1alpha1.ClusterRequest, exclusive func(purpose string) bool) (*Violation, error) {
	req, v, err := RequesterFor(ctx, e.platform, cr)
	if err != nil || v != nil || req == nil {
		return v, err
	}
	if cr.Spec.Purpose == clustersv1alpha1.PurposePlatform {
		return violation(RuleNoPlatformRequest, "%s may not request a cluster of purpose %s", req, cr.Spec.Purpose), nil
	}
	if req.MCP.Name != "" {
		own, err := LoadOwnership(ctx, e.platform)
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("ClusterRequest %s/%s", cr.Namespace, cr.Name)
		if v, err := e.checkTenantMCP(ctx, req, own, req.MCP, what); v != nil || err != nil {
			return v, err
		}
	}
	live, err := requestsOf(ctx, e.platform, req)
	if err != nil {
		return nil, err
	}
	live = slices.DeleteFunc(live, func(x clustersv1alpha1.ClusterRequest) bool {
		return !x.DeletionTimestamp.IsZero() && x.UID != cr.UID
	})
	if !slices.ContainsFunc(live, func(x clustersv1alpha1.ClusterRequest) bool { return x.UID == cr.UID }) {
		// Not in the cache yet: it is the newest.
		live = append(live, *cr)
	}
	// Granted requests come first: they hold their cluster, and creation
	// times (whole seconds) cannot order requests made within one second.
	slices.SortFunc(live, func(a, b clustersv1alpha1.ClusterRequest) int {
		return cmp.Or(cmp.Compare(held(b), held(a)), a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	pos, exclusivePos := 0, 0
	for _, x := range live {
		if x.UID == cr.UID {
			break
		}
		if x.Namespace == cr.Namespace {
			pos++
		}
		if exclusive(x.Spec.Purpose) {
			exclusivePos++
		}
	}
	if limit := req.MaxClusterRequests(); pos >= limit {
		return violation(RuleMaxClusterRequests, "%s already has %d ClusterRequests in namespace %s (spec.accessPolicy.maxClusterRequests is %d)", req, pos, cr.Namespace, limit), nil
	}
	if limit := req.MaxExclusiveClusters(); exclusive(cr.Spec.Purpose) && exclusivePos >= limit {
		return violation(RuleMaxExclusive, "purpose %s gets an Exclusive cluster and %s already has %d (spec.accessPolicy.maxExclusiveClusters is %d)",
			cr.Spec.Purpose, req, exclusivePos, limit), nil
	}
	return nil, nil
}

// requestsOf returns the ClusterRequests of req: every one in its provider
// namespaces and, for a ServiceProvider, those in MCP namespaces labelled
// with its name. Requests labelled with its name anywhere else (another
// provider's namespace) are not its: no one can raise a provider's count.
func requestsOf(ctx context.Context, c client.Reader, req *Requester) ([]clustersv1alpha1.ClusterRequest, error) {
	namespaces, err := NamespacesOf(ctx, c, req.Kind, req.Name)
	if err != nil {
		return nil, err
	}
	if req.Namespace != "" && !slices.Contains(namespaces, req.Namespace) {
		// A provider namespace without an owner reference.
		namespaces = append(namespaces, req.Namespace)
	}
	var out []clustersv1alpha1.ClusterRequest
	for _, ns := range namespaces {
		list := &clustersv1alpha1.ClusterRequestList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list ClusterRequests in %s: %w", ns, err)
		}
		out = append(out, list.Items...)
	}
	if req.Kind != KindServiceProvider {
		return out, nil
	}
	list := &clustersv1alpha1.ClusterRequestList{}
	if err := c.List(ctx, list, client.MatchingLabels{providerv1alpha1.ManagedByLabel: req.Name}); err != nil {
		return nil, fmt.Errorf("list ClusterRequests of %s: %w", req, err)
	}
	for _, x := range list.Items {
		if strings.HasPrefix(x.Namespace, corev2alpha1.MCPNamespacePrefix) {
			out = append(out, x)
		}
	}
	return out, nil
}

// route is how an AccessRequest reaches its cluster.
type route int

const (
	// viaClusterRef: spec.clusterRef names the Cluster.
	viaClusterRef route = iota
	// viaOwnRequest: spec.requestRef names a ClusterRequest of the
	// provider's own namespace.
	viaOwnRequest
	// viaTenantMCP: spec.requestRef names the ClusterRequest of a
	// ManagedControlPlane of one of the provider's tenants.
	viaTenantMCP
	// viaMCPNamespace: a request in a tenant's MCP namespace names a
	// ClusterRequest of that namespace, which must be the MCP's own
	// (viaTenantMCP) or the provider's (viaOwnRequest); CheckClusterRequest
	// decides once it is read.
	viaMCPNamespace
)

// OnboardingSource returns a reader of the onboarding cluster, where the
// service objects of the providers' tenants live; nil when the onboarding
// cluster is not known (yet).
type OnboardingSource func(ctx context.Context) (client.Reader, error)

// Enforcer checks AccessRequests against the access policy.
type Enforcer struct {
	platform        client.Reader
	onboarding      OnboardingSource
	accessNamespace string
}

// NewEnforcer returns an Enforcer that reads the platform cluster through
// platform and the onboarding cluster through onboarding; accessNamespace
// is the namespace on target clusters that holds the requests'
// ServiceAccounts.
func NewEnforcer(platform client.Reader, onboarding OnboardingSource, accessNamespace string) *Enforcer {
	return &Enforcer{platform: platform, onboarding: onboarding, accessNamespace: accessNamespace}
}

// AccessCheck is the policy decision for one AccessRequest, made in three
// steps as the request is resolved: its reference (CheckReference), its
// cluster (Ceiling) and its permissions (Ceiling.CheckToken).
type AccessCheck struct {
	// Requester is the provider the request belongs to.
	Requester *Requester
	route     route
	ownership *Ownership
	e         *Enforcer
}

// CheckReference checks what spec.clusterRef or spec.requestRef of ar
// names, before anything is read through it. It returns a nil AccessCheck
// for a request outside provider namespaces, which is not policed. A
// requestRef may name a ClusterRequest of the provider's own namespace, or
// the ClusterRequest of a ManagedControlPlane that is a tenant of the
// provider: a ServiceProvider with an object of one of its service kinds
// named like the MCP in the MCP's namespace on the onboarding cluster.
func (e *Enforcer) CheckReference(ctx context.Context, ar *clustersv1alpha1.AccessRequest) (*AccessCheck, *Violation, error) {
	req, v, err := RequesterFor(ctx, e.platform, ar)
	if err != nil || v != nil || req == nil {
		return nil, v, err
	}
	own, err := LoadOwnership(ctx, e.platform)
	if err != nil {
		return nil, nil, err
	}
	a := &AccessCheck{Requester: req, ownership: own, e: e}
	ref := ar.Spec.RequestRef
	if req.MCP.Name != "" {
		// A request in a tenant's MCP namespace: that MCP must be a
		// tenant, whatever the request refers to.
		what := fmt.Sprintf("AccessRequest %s/%s", ar.Namespace, ar.Name)
		if v, err := e.checkTenantMCP(ctx, req, own, req.MCP, what); v != nil || err != nil {
			return a, v, err
		}
		switch {
		case ref == nil:
			a.route = viaClusterRef
			return a, nil, nil
		case ref.Namespace == "" || ref.Namespace == ar.Namespace:
			a.route = viaMCPNamespace
			return a, nil, nil
		}
		return a, violation(RuleRequestRefScope, "requestRef %s: a request in the platform namespace of ManagedControlPlane %s may refer only to ClusterRequests of that namespace",
			ref.NamespacedName(), req.MCP), nil
	}
	switch {
	case ref == nil:
		a.route = viaClusterRef
		return a, nil, nil
	case ref.Namespace == "" || ref.Namespace == ar.Namespace:
		a.route = viaOwnRequest
		return a, nil, nil
	}
	a.route = viaTenantMCP
	v, err = e.checkTenant(ctx, a, ref)
	return a, v, err
}

// checkTenant checks that ref names the ClusterRequest of a
// ManagedControlPlane of one of req's tenants.
func (e *Enforcer) checkTenant(ctx context.Context, a *AccessCheck, ref *common.ObjectReference) (*Violation, error) {
	req := a.Requester
	if !strings.HasPrefix(ref.Namespace, corev2alpha1.MCPNamespacePrefix) {
		return violation(RuleRequestRefScope, "requestRef %s is in namespace %s, which is neither %s nor a ManagedControlPlane's", ref.NamespacedName(), ref.Namespace, req.Namespace), nil
	}
	what := "requestRef " + ref.NamespacedName().String()
	if req.Kind != KindServiceProvider {
		return violation(RuleTenantsOnly, "%s: only ServiceProviders serve ManagedControlPlanes, %s is a %s", what, req, req.Kind), nil
	}
	ns := &corev1.Namespace{}
	if err := e.platform.Get(ctx, client.ObjectKey{Name: ref.Namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return violation(RuleTenantsOnly, "%s: namespace %s does not exist", what, ref.Namespace), nil
		}
		return nil, fmt.Errorf("get namespace %s: %w", ref.Namespace, err)
	}
	mcp, ok := corev2alpha1.MCPOfNamespace(ns)
	if !ok || mcp.Name != ref.Name {
		return violation(RuleTenantsOnly, "%s is not the ClusterRequest of a ManagedControlPlane", what), nil
	}
	return e.checkTenantMCP(ctx, req, a.ownership, mcp, what)
}

// checkTenantMCP checks that the ManagedControlPlane mcp (namespace and name
// on the onboarding cluster) is a tenant of req: an object of one of req's
// accepted service kinds named like the MCP exists in the MCP's namespace
// on the onboarding cluster. what starts the message of a Violation.
func (e *Enforcer) checkTenantMCP(ctx context.Context, req *Requester, own *Ownership, mcp types.NamespacedName, what string) (*Violation, error) {
	if req.Kind != KindServiceProvider {
		return violation(RuleTenantsOnly, "%s: only ServiceProviders serve ManagedControlPlanes, %s is a %s", what, req, req.Kind), nil
	}
	kinds := own.Kinds(req.Kind, req.Name)
	if len(kinds) == 0 {
		return violation(RuleTenantsOnly, "%s: %s has no service kinds registered in status.resources, so it has no tenants", what, req), nil
	}
	if e.onboarding == nil {
		return nil, fmt.Errorf("check tenant for %s: the onboarding cluster is not configured", what)
	}
	onboarding, err := e.onboarding(ctx)
	if err != nil {
		return nil, fmt.Errorf("check tenant for %s: onboarding cluster: %w", what, err)
	}
	if onboarding == nil {
		return nil, fmt.Errorf("check tenant for %s: the onboarding cluster is not known yet", what)
	}
	var names []string
	for _, gvk := range kinds {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(schema.GroupVersionKind(gvk))
		err := onboarding.Get(ctx, mcp, obj)
		switch {
		case err == nil:
			return nil, nil
		case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err):
		default:
			return nil, fmt.Errorf("check tenant for %s: get %s %s on the onboarding cluster: %w", what, gvk.Kind, mcp, err)
		}
		names = append(names, gvk.Kind)
	}
	return violation(RuleTenantsOnly, "%s: ManagedControlPlane %s is not a tenant of %s (no %s %s on the onboarding cluster)",
		what, mcp, req, strings.Join(names, " or "), mcp), nil
}

// CheckClusterRequest checks the ClusterRequest cr that spec.requestRef
// names, once it is read: a request in a tenant's MCP namespace may use the
// MCP's own ClusterRequest (MCP ceiling) or one of its provider's, never
// another provider's; a requestRef to a tenant's MCP from the provider's
// namespace must name the MCP's own ClusterRequest, not one a provider
// created under that name.
func (a *AccessCheck) CheckClusterRequest(cr *clustersv1alpha1.ClusterRequest) *Violation {
	key := client.ObjectKeyFromObject(cr)
	switch a.route {
	case viaMCPNamespace:
		switch {
		case cr.Name == a.Requester.MCP.Name && ownedByMCP(cr, a.Requester.MCP):
			a.route = viaTenantMCP
		case cr.Labels[providerv1alpha1.ManagedByLabel] == a.Requester.Name:
			a.route = viaOwnRequest
		default:
			return violation(RuleRequestRefScope, "requestRef %s is neither the ClusterRequest of ManagedControlPlane %s nor one of %s (label %s=%s)",
				key, a.Requester.MCP, a.Requester, providerv1alpha1.ManagedByLabel, a.Requester.Name)
		}
	case viaTenantMCP:
		if owner := cr.Labels[providerv1alpha1.ManagedByLabel]; owner != "" && owner != managedByOperator {
			return violation(RuleTenantsOnly, "requestRef %s is labelled %s=%s, so it is not the ManagedControlPlane's own ClusterRequest", key, providerv1alpha1.ManagedByLabel, owner)
		}
	}
	return nil
}

// Ceiling returns the ceiling of the request's permissions on cluster, or a
// Violation when the provider may not have access to it at all: the
// platform cluster never; an MCP or other Exclusive cluster only through a
// requestRef (its own ClusterRequest or its tenant's MCP's), with the MCP
// ceiling; a shared cluster with the onboarding ceiling if it serves
// onboarding and the workload ceiling for any other purpose, both when it
// serves both.
func (a *AccessCheck) Ceiling(cluster *clustersv1alpha1.Cluster) ([]Ceiling, *Violation) {
	key := client.ObjectKeyFromObject(cluster)
	if a.route == viaMCPNamespace {
		// The ClusterRequest was not checked (CheckClusterRequest): fail
		// closed.
		return nil, violation(RuleRequestRefScope, "the ClusterRequest that led to Cluster %s was not checked", key)
	}
	if slices.Contains(cluster.Spec.Purposes, clustersv1alpha1.PurposePlatform) {
		return nil, violation(RuleNoPlatform, "Cluster %s serves purpose %s", key, clustersv1alpha1.PurposePlatform)
	}
	own := func(group string) bool { return a.ownership.MayOwn(a.Requester.Kind, a.Requester.Name, group) }
	if cluster.Spec.Tenancy == clustersv1alpha1.TenancyExclusive || slices.Contains(cluster.Spec.Purposes, clustersv1alpha1.PurposeMCP) {
		if a.route == viaClusterRef {
			return nil, violation(RuleMCPThroughRequest, "clusterRef %s names an %s cluster of purposes %v; request access through its ClusterRequest (requestRef)",
				key, cluster.Spec.Tenancy, cluster.Spec.Purposes)
		}
		return []Ceiling{a.ceiling(ScopeMCP, own)}, nil
	}
	var out []Ceiling
	if slices.Contains(cluster.Spec.Purposes, clustersv1alpha1.PurposeOnboarding) {
		out = append(out, a.ceiling(ScopeOnboarding, own))
	}
	if slices.ContainsFunc(cluster.Spec.Purposes, func(p string) bool { return p != clustersv1alpha1.PurposeOnboarding }) || len(out) == 0 {
		out = append(out, a.ceiling(ScopeWorkload, own))
	}
	return out, nil
}

// ceiling returns the requester's ceiling of scope: the default rules, its
// own groups, and its spec.accessPolicy's extra rules and roleRefs there.
func (a *AccessCheck) ceiling(scope Scope, own func(string) bool) Ceiling {
	extra, roleRefs := Grants(a.Requester.Policy, scope)
	return NewCeiling(scope, own, extra, a.e.accessNamespace).WithRoleRefs(roleRefs)
}

// Grants returns what the access policy pol grants beyond the defaults
// in scope: the extra rules and the ClusterRoles it may bind by roleRef
// whatever their rules.
func Grants(pol providerv1alpha1.AccessPolicy, scope Scope) (extra []rbacv1.PolicyRule, roleRefs []string) {
	var grants providerv1alpha1.RoleRefGrants
	if pol.RoleRefs != nil {
		grants = *pol.RoleRefs
	}
	switch scope {
	case ScopeOnboarding:
		return pol.Onboarding, grants.Onboarding
	case ScopeMCP:
		return pol.MCP, grants.MCP
	case ScopeWorkload:
		return pol.Workload, grants.Workload
	}
	return nil, nil
}

// CheckToken checks the permissions and roleRefs of a token request against
// every ceiling. A ClusterRole that every ceiling names among its roleRefs
// (spec.accessPolicy.roleRefs) is granted as it is. Other Roles and
// ClusterRoles named by roleRefs are read from the target cluster through
// target: their rules must be within the ceiling too; Kubernetes' admin
// roles, aggregated ClusterRoles (whose rules can grow) and roles that do
// not exist are refused.
func CheckToken(ctx context.Context, target client.Reader, ceilings []Ceiling, token *clustersv1alpha1.TokenConfig) (*Violation, error) {
	if token == nil {
		return nil, nil
	}
	if v := checkPermissions(ceilings, token.Permissions); v != nil {
		return v, nil
	}
	for i, ref := range token.RoleRefs {
		if v, err := checkRoleRef(ctx, target, ceilings, i, ref); v != nil || err != nil {
			return v, err
		}
	}
	return nil, nil
}

// checkPermissions checks the permissions of a token request against every
// ceiling.
func checkPermissions(ceilings []Ceiling, permissions []clustersv1alpha1.PermissionsRequest) *Violation {
	for _, c := range ceilings {
		for i, p := range permissions {
			what := fmt.Sprintf("permissions[%d]", i)
			// The onboarding cluster's namespaces are the tenants': a
			// provider must not take a name before its tenant does.
			if c.Scope() == ScopeOnboarding && p.Namespace != "" && !p.DisableAutomaticNamespaceCreation {
				return violation(RuleTenantNamespaces, "%s: namespace %s would be created if missing; set disableAutomaticNamespaceCreation", what, p.Namespace)
			}
			if v := c.Check(what, p.Namespace, p.Rules, RuleCeiling); v != nil {
				return v
			}
		}
	}
	return nil
}

// checkRoleRef checks roleRefs[i] of a token request: a ClusterRole every
// ceiling grants passes as it is, any other role's rules must be within
// every ceiling.
func checkRoleRef(ctx context.Context, target client.Reader, ceilings []Ceiling, i int, ref common.RoleRef) (*Violation, error) {
	what := fmt.Sprintf("roleRefs[%d] %s %s", i, ref.Kind, ref.Name)
	var rules []rbacv1.PolicyRule
	var v *Violation
	var err error
	ns := ""
	if ref.Kind == common.RoleKindClusterRole {
		if _, granted := grantedClusterRole(ceilings, ref.Name); granted {
			return nil, nil
		}
		rules, v, err = clusterRoleRules(ctx, target, ceilings, what, ref.Name)
	} else {
		ns = ref.Namespace
		rules, v, err = roleRules(ctx, target, what, ref)
	}
	if v != nil || err != nil {
		return v, err
	}
	for _, c := range ceilings {
		if v := c.Check(what, ns, rules, RuleRoleRefCeiling); v != nil {
			return v, nil
		}
	}
	return nil, nil
}

// clusterRoleRules reads the rules of the ClusterRole name, which not every
// ceiling grants, from the target cluster. Kubernetes' admin roles,
// aggregated ClusterRoles (whose rules can grow) and ClusterRoles that do
// not exist are refused.
func clusterRoleRules(ctx context.Context, target client.Reader, ceilings []Ceiling, what, name string) ([]rbacv1.PolicyRule, *Violation, error) {
	c, _ := grantedClusterRole(ceilings, name)
	if AdminRole(name) {
		return nil, violation(RuleNoAdminRoles, "roleRef ClusterRole %s: a Kubernetes admin role, bound only when spec.accessPolicy.roleRefs.%s of the provider names it",
			name, c.Scope()), nil
	}
	role := &rbacv1.ClusterRole{}
	if err := target.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, violation(RuleRoleRefCeiling, "%s does not exist on the target cluster, so its rules cannot be checked", what), nil
		}
		return nil, nil, fmt.Errorf("get ClusterRole %s: %w", name, err)
	}
	if role.AggregationRule != nil {
		return nil, violation(RuleRoleRefCeiling, "%s is aggregated: its rules can grow after the check; bound only when spec.accessPolicy.roleRefs.%s names it",
			what, c.Scope()), nil
	}
	return role.Rules, nil, nil
}

// roleRules reads the rules of the Role ref from the target cluster; a Role
// that does not exist is refused.
func roleRules(ctx context.Context, target client.Reader, what string, ref common.RoleRef) ([]rbacv1.PolicyRule, *Violation, error) {
	role := &rbacv1.Role{}
	if err := target.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, role); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, violation(RuleRoleRefCeiling, "%s in namespace %s does not exist on the target cluster, so its rules cannot be checked", what, ref.Namespace), nil
		}
		return nil, nil, fmt.Errorf("get Role %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return role.Rules, nil, nil
}

// grantedClusterRole reports whether every ceiling grants the ClusterRole
// name as a roleRef (a cluster of two purposes needs it in both), and
// returns the first ceiling that does not.
func grantedClusterRole(ceilings []Ceiling, name string) (Ceiling, bool) {
	for _, c := range ceilings {
		if !c.GrantsClusterRole(name) {
			return c, false
		}
	}
	return Ceiling{}, len(ceilings) > 0
}
