package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/marketplane/marketplane/api/crds"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// PurposeTenantRole is the value of providerv1alpha1.ManagedPurposeLabel on
// the aggregated ClusterRoles that give tenants a ServiceProvider's service
// kinds.
const PurposeTenantRole = "tenant-role"

// The labels by which the kube-controller-manager's clusterrole-aggregation
// controller adds a ClusterRole's rules to the built-in view, edit and admin
// ClusterRoles.
const (
	AggregateToViewLabel  = "rbac.authorization.k8s.io/aggregate-to-view"
	AggregateToEditLabel  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToAdminLabel = "rbac.authorization.k8s.io/aggregate-to-admin"
)

// Verbs of the tenants' roles: view reads, edit writes. edit and admin get
// the view rules too (the view role is labelled for all three), as the
// built-in roles do.
var (
	tenantViewVerbs = []string{"get", "list", "watch"}
	tenantEditVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}
)

// tenantRolesResult is what ensureTenantRoles leaves for the end of the
// reconcile: the provider's deployment does not wait for the tenants'
// roles, nor they for it.
type tenantRolesResult struct {
	// wait asks for another look: a kind's CRD is not on the onboarding
	// cluster yet, or that cluster is not known yet.
	wait time.Duration
	err  error
}

// join adds t to the outcome of the reconcile.
func (t tenantRolesResult) join(res ctrl.Result, err error) (ctrl.Result, error) {
	if t.err != nil {
		err = errors.Join(err, t.err)
	}
	if t.wait > 0 && (res.RequeueAfter == 0 || res.RequeueAfter > t.wait) {
		res.RequeueAfter = t.wait
	}
	return res, err
}

// tenantKind is one service kind tenants get: its API group and plural.
type tenantKind struct{ group, resource string }

// ensureTenantRoles keeps, on the onboarding cluster, the aggregated view
// and edit ClusterRoles of a ServiceProvider's service kinds, and deletes
// them when it has none. The kinds are the entries of status.resources
// whose API group the provider owns (own: the provider's word alone must
// never grant tenants a group), and of those only the ones whose CRD on the
// onboarding cluster is namespaced (tenants act in their namespaces) and
// not labelled for the platform cluster (a provider's ProviderConfig, say).
func (r *Reconciler[T]) ensureTenantRoles(ctx context.Context, obj T, w *deploy.Workload, n names, own *policy.Ownership) tenantRolesResult {
	if r.opts.tenantRoles == nil || r.kind.Resources == nil {
		return tenantRolesResult{}
	}
	log := logf.FromContext(ctx)
	registered := own.Kinds(r.kind.Name, obj.GetName())
	oc, err := r.opts.tenantRoles(ctx)
	if err != nil {
		return tenantRolesResult{err: fmt.Errorf("tenant roles: onboarding cluster: %w", err)}
	}
	if oc == nil {
		if len(registered) == 0 {
			return tenantRolesResult{}
		}
		log.V(1).Info("Onboarding cluster not known yet; tenants' roles wait")
		return tenantRolesResult{wait: r.opts.missingSecretInterval}
	}
	kinds, missing, err := tenantKinds(ctx, oc, registered)
	if err != nil {
		return tenantRolesResult{err: err}
	}
	var res tenantRolesResult
	if len(missing) > 0 {
		// init usually installs the CRDs before it registers the kinds;
		// a provider that does it the other way round gets its roles a
		// little later.
		log.V(1).Info("Service kinds not served on the onboarding cluster yet; their tenant roles wait", "kinds", missing)
		res.wait = r.opts.missingSecretInterval
	}
	if len(kinds) == 0 {
		left, err := deleteAllIn(ctx, oc, oc, tenantRoleObjects(n))
		if err != nil {
			return tenantRolesResult{err: fmt.Errorf("remove tenant roles: %w", err)}
		}
		if len(left) > 0 {
			log.V(1).Info("Tenant roles still being deleted", "left", left)
		}
		return res
	}
	view, edit := tenantRules(kinds)
	roles := []*rbacv1.ClusterRole{
		tenantRole(w, n.TenantViewRole, view, AggregateToViewLabel, AggregateToEditLabel, AggregateToAdminLabel),
		tenantRole(w, n.TenantEditRole, edit, AggregateToEditLabel, AggregateToAdminLabel),
	}
	for _, role := range roles {
		if err := apply(ctx, oc, role); err != nil {
			return tenantRolesResult{err: fmt.Errorf("tenant roles on the onboarding cluster: %w", err)}
		}
	}
	return res
}

// tenantRole is one aggregated ClusterRole. It carries the provider's
// labels but no owner reference: the provider object lives on the platform
// cluster, and an owner the onboarding cluster's garbage collector cannot
// find would make it delete the role at once.
func tenantRole(w *deploy.Workload, name string, rules []rbacv1.PolicyRule, aggregateTo ...string) *rbacv1.ClusterRole {
	labels := maps.Clone(w.Labels)
	labels[providerv1alpha1.ManagedPurposeLabel] = PurposeTenantRole
	for _, l := range aggregateTo {
		labels[l] = "true"
	}
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

// tenantRoleObjects are the tenant roles of a provider, by name, for
// deletion.
func tenantRoleObjects(n names) []client.Object {
	return []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: n.TenantViewRole}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: n.TenantEditRole}},
	}
}

// tenantRules returns the rules of the view and edit roles: one rule per
// API group, its kinds sorted, so that an unchanged set of kinds applies
// unchanged rules.
func tenantRules(kinds []tenantKind) (view, edit []rbacv1.PolicyRule) {
	byGroup := map[string][]string{}
	for _, k := range kinds {
		if !slices.Contains(byGroup[k.group], k.resource) {
			byGroup[k.group] = append(byGroup[k.group], k.resource)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		resources := slices.Sorted(slices.Values(byGroup[g]))
		withStatus := make([]string, 0, 2*len(resources))
		for _, res := range resources {
			withStatus = append(withStatus, res, res+"/status")
		}
		view = append(view, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: withStatus, Verbs: tenantViewVerbs})
		edit = append(edit, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: resources, Verbs: tenantEditVerbs})
	}
	return view, edit
}

// tenantKinds resolves the registered kinds on the onboarding cluster:
// through its discovery (the client's REST mapper) to their plural and
// scope, and through their CRD's openmcp.cloud/cluster label to the
// cluster they belong to. status.resources records neither. missing lists
// the kinds the onboarding cluster does not serve (yet); kinds it serves
// without a CRD (an aggregated API) are left out too, since nothing says
// which cluster they belong to.
func tenantKinds(ctx context.Context, oc client.Client, registered []metav1.GroupVersionKind) (kinds []tenantKind, missing []string, err error) {
	for _, gvk := range registered {
		gk := schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}
		m, err := oc.RESTMapper().RESTMapping(gk)
		if apimeta.IsNoMatchError(err) {
			missing = append(missing, gk.String())
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("tenant roles: look up %s on the onboarding cluster: %w", gk, err)
		}
		if m.Scope.Name() != apimeta.RESTScopeNameNamespace {
			continue
		}
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		name := m.Resource.Resource + "." + m.Resource.Group
		if err := oc.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, fmt.Errorf("tenant roles: get CustomResourceDefinition %s on the onboarding cluster: %w", name, err)
		}
		if crd.Labels[crds.ClusterLabel] == crds.ClusterPlatform {
			continue
		}
		kinds = append(kinds, tenantKind{group: m.Resource.Group, resource: m.Resource.Resource})
	}
	return kinds, missing, nil
}
