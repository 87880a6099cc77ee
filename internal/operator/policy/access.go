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

// RequesterOf returns the provider whose namespace is namespace, or nil when
// it is not a provider namespace: requests of platform operators and of the
// operator itself (the ManagedControlPlanes' namespaces) are not policed.
func RequesterOf(ctx context.Context, c client.Reader, namespace string) (*Requester, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get namespace %s: %w", namespace, err)
	}
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
		logf.FromContext(ctx).Error(err, "find provider namespaces", "kind", kind, "name", obj.GetName())
	}
	return namespaces
}

// NamespacesOf returns the provider namespaces of the provider kind/name
// (one, unless a namespace of an earlier provider of the name is still
// being deleted).
func NamespacesOf(ctx context.Context, c client.Reader, kind, name string) ([]string, error) {
	list := &corev1.NamespaceList{}
	if err := c.List(ctx, list, client.MatchingLabels{providerKindLabel: kind, providerv1alpha1.ManagedByLabel: managedByOperator}); err != nil {
		return nil, fmt.Errorf("list namespaces of %s %s: %w", kind, name, err)
	}
	var out []string
	for _, ns := range list.Items {
		for _, ref := range ns.OwnerReferences {
			if ref.Kind == kind && ref.Name == name {
				out = append(out, ns.Name)
				break
			}
		}
	}
	return out, nil
}

// CheckClusterRequest checks a ClusterRequest against the policy of the
// provider whose namespace it is in: no platform cluster, at most
// MaxClusterRequests requests in the namespace and at most
// MaxExclusiveClusters of them for an exclusive purpose. The requests
// count in the order they were created, so that a new request never takes
// the place of an older one. exclusive reports whether a purpose gets an
// Exclusive cluster. Requests outside provider namespaces are not checked.
func CheckClusterRequest(ctx context.Context, c client.Reader, cr *clustersv1alpha1.ClusterRequest, exclusive func(purpose string) bool) (*Violation, error) {
	req, err := RequesterOf(ctx, c, cr.Namespace)
	if err != nil || req == nil {
		return nil, err
	}
	if cr.Spec.Purpose == clustersv1alpha1.PurposePlatform {
		return violation(RuleNoPlatformRequest, "%s may not request a cluster of purpose %s", req, cr.Spec.Purpose), nil
	}
	list := &clustersv1alpha1.ClusterRequestList{}
	if err := c.List(ctx, list, client.InNamespace(cr.Namespace)); err != nil {
		return nil, fmt.Errorf("list ClusterRequests in %s: %w", cr.Namespace, err)
	}
	live := slices.DeleteFunc(list.Items, func(x clustersv1alpha1.ClusterRequest) bool {
		return !x.DeletionTimestamp.IsZero() && x.UID != cr.UID
	})
	if !slices.ContainsFunc(live, func(x clustersv1alpha1.ClusterRequest) bool { return x.UID == cr.UID }) {
		// Not in the cache yet: it is the newest.
		live = append(live, *cr)
	}
	slices.SortFunc(live, func(a, b clustersv1alpha1.ClusterRequest) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	pos, exclusivePos := 0, 0
	for _, x := range live {
		if x.UID == cr.UID {
			break
		}
		pos++
		if exclusive(x.Spec.Purpose) {
			exclusivePos++
		}
	}
	if limit := req.MaxClusterRequests(); pos >= limit {
		return violation(RuleMaxClusterRequests, "%s already has %d ClusterRequests (spec.accessPolicy.maxClusterRequests is %d)", req, pos, limit), nil
	}
	if limit := req.MaxExclusiveClusters(); exclusive(cr.Spec.Purpose) && exclusivePos >= limit {
		return violation(RuleMaxExclusive, "purpose %s gets an Exclusive cluster and %s already has %d (spec.accessPolicy.maxExclusiveClusters is %d)",
			cr.Spec.Purpose, req, exclusivePos, limit), nil
	}
	return nil, nil
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
	req, err := RequesterOf(ctx, e.platform, ar.Namespace)
	if err != nil || req == nil {
		return nil, nil, err
	}
	own, err := LoadOwnership(ctx, e.platform)
	if err != nil {
		return nil, nil, err
	}
	a := &AccessCheck{Requester: req, ownership: own, e: e}
	ref := ar.Spec.RequestRef
	switch {
	case ref == nil:
		a.route = viaClusterRef
		return a, nil, nil
	case ref.Namespace == "" || ref.Namespace == ar.Namespace:
		a.route = viaOwnRequest
		return a, nil, nil
	}
	a.route = viaTenantMCP
	v, err := e.checkTenant(ctx, a, ref)
	return a, v, err
}

// checkTenant checks that ref names the ClusterRequest of a
// ManagedControlPlane of one of req's tenants.
func (e *Enforcer) checkTenant(ctx context.Context, a *AccessCheck, ref *common.ObjectReference) (*Violation, error) {
	req := a.Requester
	if !strings.HasPrefix(ref.Namespace, corev2alpha1.MCPNamespacePrefix) {
		return violation(RuleRequestRefScope, "requestRef %s is in namespace %s, which is neither %s nor a ManagedControlPlane's", ref.NamespacedName(), ref.Namespace, req.Namespace), nil
	}
	if req.Kind != KindServiceProvider {
		return violation(RuleTenantsOnly, "requestRef %s: only ServiceProviders serve ManagedControlPlanes, %s is a %s", ref.NamespacedName(), req, req.Kind), nil
	}
	ns := &corev1.Namespace{}
	if err := e.platform.Get(ctx, client.ObjectKey{Name: ref.Namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return violation(RuleTenantsOnly, "requestRef %s: namespace %s does not exist", ref.NamespacedName(), ref.Namespace), nil
		}
		return nil, fmt.Errorf("get namespace %s: %w", ref.Namespace, err)
	}
	// The MCP controller labels the namespace with the MCP; the name, a
	// hash of the MCP's namespace and name, confirms the labels.
	mcpNS, mcpName := ns.Labels[corev2alpha1.MCPNamespaceLabel], ns.Labels[corev2alpha1.MCPNameLabel]
	if mcpName == "" || mcpName != ref.Name || corev2alpha1.StableMCPNamespace(mcpNS, mcpName) != ref.Namespace {
		return violation(RuleTenantsOnly, "requestRef %s is not the ClusterRequest of a ManagedControlPlane", ref.NamespacedName()), nil
	}
	kinds := a.ownership.Kinds(req.Kind, req.Name)
	if len(kinds) == 0 {
		return violation(RuleTenantsOnly, "requestRef %s: %s has no service kinds registered in status.resources, so it has no tenants", ref.NamespacedName(), req), nil
	}
	if e.onboarding == nil {
		return nil, fmt.Errorf("check tenant of requestRef %s: the onboarding cluster is not configured", ref.NamespacedName())
	}
	onboarding, err := e.onboarding(ctx)
	if err != nil {
		return nil, fmt.Errorf("check tenant of requestRef %s: onboarding cluster: %w", ref.NamespacedName(), err)
	}
	if onboarding == nil {
		return nil, fmt.Errorf("check tenant of requestRef %s: the onboarding cluster is not known yet", ref.NamespacedName())
	}
	var names []string
	for _, gvk := range kinds {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(schema.GroupVersionKind(gvk))
		err := onboarding.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: mcpName}, obj)
		switch {
		case err == nil:
			return nil, nil
		case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err):
		default:
			return nil, fmt.Errorf("check tenant of requestRef %s: get %s %s/%s on the onboarding cluster: %w", ref.NamespacedName(), gvk.Kind, mcpNS, mcpName, err)
		}
		names = append(names, gvk.Kind)
	}
	return violation(RuleTenantsOnly, "requestRef %s: ManagedControlPlane %s/%s is not a tenant of %s (no %s %s/%s on the onboarding cluster)",
		ref.NamespacedName(), mcpNS, mcpName, req, strings.Join(names, " or "), mcpNS, mcpName), nil
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
	if slices.Contains(cluster.Spec.Purposes, clustersv1alpha1.PurposePlatform) {
		return nil, violation(RuleNoPlatform, "Cluster %s serves purpose %s", key, clustersv1alpha1.PurposePlatform)
	}
	own := func(group string) bool { return a.ownership.MayOwn(a.Requester.Kind, a.Requester.Name, group) }
	pol := a.Requester.Policy
	if cluster.Spec.Tenancy == clustersv1alpha1.TenancyExclusive || slices.Contains(cluster.Spec.Purposes, clustersv1alpha1.PurposeMCP) {
		if a.route == viaClusterRef {
			return nil, violation(RuleMCPThroughRequest, "clusterRef %s names an %s cluster of purposes %v; request access through its ClusterRequest (requestRef)",
				key, cluster.Spec.Tenancy, cluster.Spec.Purposes)
		}
		return []Ceiling{NewCeiling(ScopeMCP, own, pol.MCP, a.e.accessNamespace)}, nil
	}
	var out []Ceiling
	if slices.Contains(cluster.Spec.Purposes, clustersv1alpha1.PurposeOnboarding) {
		out = append(out, NewCeiling(ScopeOnboarding, own, pol.Onboarding, a.e.accessNamespace))
	}
	if slices.ContainsFunc(cluster.Spec.Purposes, func(p string) bool { return p != clustersv1alpha1.PurposeOnboarding }) || len(out) == 0 {
		out = append(out, NewCeiling(ScopeWorkload, own, pol.Workload, a.e.accessNamespace))
	}
	return out, nil
}

// CheckToken checks the permissions and roleRefs of a token request against
// every ceiling. Roles and ClusterRoles named by roleRefs are read from the
// target cluster through target: their rules must be within the ceiling
// too; Kubernetes' admin roles, aggregated ClusterRoles (whose rules can
// grow) and roles that do not exist are refused.
func CheckToken(ctx context.Context, target client.Reader, ceilings []Ceiling, token *clustersv1alpha1.TokenConfig) (*Violation, error) {
	if token == nil {
		return nil, nil
	}
	for _, c := range ceilings {
		for i, p := range token.Permissions {
			what := fmt.Sprintf("permissions[%d]", i)
			// The onboarding cluster's namespaces are the tenants': a
			// provider must not take a name before its tenant does.
			if c.Scope() == ScopeOnboarding && p.Namespace != "" && !p.DisableAutomaticNamespaceCreation {
				return violation(RuleTenantNamespaces, "%s: namespace %s would be created if missing; set disableAutomaticNamespaceCreation", what, p.Namespace), nil
			}
			if v := c.Check(what, p.Namespace, p.Rules, RuleCeiling); v != nil {
				return v, nil
			}
		}
	}
	for i, ref := range token.RoleRefs {
		what := fmt.Sprintf("roleRefs[%d] %s %s", i, ref.Kind, ref.Name)
		var rules []rbacv1.PolicyRule
		switch ref.Kind {
		case common.RoleKindClusterRole:
			if AdminRole(ref.Name) {
				return violation(RuleNoAdminRoles, "roleRef ClusterRole %s", ref.Name), nil
			}
			role := &rbacv1.ClusterRole{}
			if err := target.Get(ctx, client.ObjectKey{Name: ref.Name}, role); err != nil {
				if apierrors.IsNotFound(err) {
					return violation(RuleRoleRefCeiling, "%s does not exist on the target cluster, so its rules cannot be checked", what), nil
				}
				return nil, fmt.Errorf("get ClusterRole %s: %w", ref.Name, err)
			}
			if role.AggregationRule != nil {
				return violation(RuleRoleRefCeiling, "%s is aggregated: its rules can grow after the check", what), nil
			}
			rules = role.Rules
		default:
			role := &rbacv1.Role{}
			if err := target.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, role); err != nil {
				if apierrors.IsNotFound(err) {
					return violation(RuleRoleRefCeiling, "%s in namespace %s does not exist on the target cluster, so its rules cannot be checked", what, ref.Namespace), nil
				}
				return nil, fmt.Errorf("get Role %s/%s: %w", ref.Namespace, ref.Name, err)
			}
			rules = role.Rules
		}
		ns := ""
		if ref.Kind != common.RoleKindClusterRole {
			ns = ref.Namespace
		}
		for _, c := range ceilings {
			if v := c.Check(what, ns, rules, RuleRoleRefCeiling); v != nil {
				return v, nil
			}
		}
	}
	return nil, nil
}
