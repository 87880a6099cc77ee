package provider

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

// Verb sets of the provider roles.
var (
	readVerbs     = []string{"get", "list", "watch"}
	allVerbs      = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	eventVerbs    = []string{"create", "patch"}
	requestWrite  = []string{"create", "update", "patch", "delete"}
	requestInit   = []string{"create", "get", "list", "watch"}
	crdVerbs      = []string{"get", "list", "watch", "create", "update", "patch"}
	statusVerbs   = []string{"update", "patch"}
	requestKinds  = []string{"clusterrequests", "accessrequests"}
	clusterKinds  = []string{"clusters", "clusterrequests", "accessrequests"}
	clustersGroup = clustersv1alpha1.GroupVersion.Group
)

// clusterProviders is the resource of the ClusterProvider kind.
const clusterProviders = "clusterproviders"

// ownObjectRules let a provider read its own object and write its status,
// where a ServiceProvider registers status.resources.
func ownObjectRules(resource, name string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{providerv1alpha1.GroupName}, Resources: []string{resource}, ResourceNames: []string{name}, Verbs: []string{"get"}},
		{APIGroups: []string{providerv1alpha1.GroupName}, Resources: []string{resource + "/status"}, ResourceNames: []string{name}, Verbs: statusVerbs},
	}
}

// namespaceRules are what both init and run may do in the provider's own
// namespace: keep Secrets and ConfigMaps, record events, elect a leader.
func namespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: allVerbs},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: eventVerbs},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: allVerbs},
	}
}

// runClusterRules are the run ServiceAccount's cluster-wide rules: read
// the API groups the provider owns, read the cluster APIs (a
// ClusterProvider also the ClusterProfiles, which say which Clusters are
// its own), its own object, and, when the platform operator opted in
// (spec.accessPolicy.secrets: ClusterWide), read Secrets in every
// namespace.
func runClusterRules(groups []string, resource, name string, metrics bool, secrets providerv1alpha1.SecretAccess) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, g := range groups {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{"*"}, Verbs: readVerbs})
	}
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{clustersGroup}, Resources: clusterKinds, Verbs: readVerbs})
	if resource == clusterProviders {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{clustersGroup}, Resources: []string{"clusterprofiles"}, Verbs: readVerbs})
	}
	if secrets == providerv1alpha1.SecretAccessClusterWide {
		// openMCP's opencontrolplane-runtime watches Secrets in every
		// namespace when its Secret watcher is on; its cache cannot sync
		// with less.
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: readVerbs})
	}
	if metrics {
		// An exposed metrics endpoint admits only scrapers whose token the
		// platform cluster authenticates and authorizes
		// (pkg/metricsauth): the provider asks the API server.
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		)
	}
	return append(rules, ownObjectRules(resource, name)...)
}

// runRoleRules are the run ServiceAccount's rules in its namespace. A
// ClusterProvider may also update the Clusters there: the operator's
// profile provisioner creates the Clusters of its profiles in its
// namespace, and the provider adds its finalizer, labels and annotations
// and keeps their kubeconfig Secrets beside them.
func runRoleRules(resource string) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{clustersGroup}, Resources: requestKinds, Verbs: requestWrite},
	}
	if resource == clusterProviders {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{clustersGroup}, Resources: []string{"clusters"}, Verbs: []string{"update", "patch"}})
	}
	return append(rules, namespaceRules()...)
}

// initClusterRules are the init ServiceAccount's cluster-wide rules:
// install CRDs, its own object.
func initClusterRules(resource, name string) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: crdVerbs},
	}
	return append(rules, ownObjectRules(resource, name)...)
}

// initRoleRules are the init ServiceAccount's rules in its namespace.
func initRoleRules() []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{clustersGroup}, Resources: requestKinds, Verbs: requestInit},
	}
	return append(rules, namespaceRules()...)
}

// grant is one ServiceAccount's ClusterRole and Role with their bindings.
type grant struct {
	serviceAccount string
	clusterRole    string
	clusterRules   []rbacv1.PolicyRule
	role           string
	roleRules      []rbacv1.PolicyRule
}

// grants returns the init and run grants of obj. The run grant follows the
// API groups obj owns (see policy.Ownership), so applying it on every
// reconcile recomputes it whenever they change.
func (r *Reconciler[T]) grants(obj T, w *deploy.Workload, n names, groups []string) []grant {
	return []grant{
		{
			serviceAccount: w.InitServiceAccount,
			clusterRole:    n.InitClusterRole,
			clusterRules:   initClusterRules(r.kind.Resource, obj.GetName()),
			role:           n.Init,
			roleRules:      initRoleRules(),
		},
		{
			serviceAccount: w.RunServiceAccount,
			clusterRole:    n.RunClusterRole,
			clusterRules:   runClusterRules(groups, r.kind.Resource, obj.GetName(), w.Metrics.Enabled, secretAccess(r.kind.Spec(obj))),
			role:           n.Run,
			roleRules:      runRoleRules(r.kind.Resource),
		},
	}
}

// ensureGrant applies g's roles and bindings.
func (r *Reconciler[T]) ensureGrant(ctx context.Context, w *deploy.Workload, g grant) error {
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: g.serviceAccount, Namespace: w.Namespace}}

	cr := &rbacv1.ClusterRole{ObjectMeta: objectMeta(w, "", g.clusterRole), Rules: g.clusterRules}
	if err := apply(ctx, r.client, cr); err != nil {
		return err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: objectMeta(w, "", g.clusterRole),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: g.clusterRole},
		Subjects:   subjects,
	}
	if err := r.applyBinding(ctx, crb, &rbacv1.ClusterRoleBinding{}, crb.RoleRef); err != nil {
		return err
	}
	role := &rbacv1.Role{ObjectMeta: objectMeta(w, w.Namespace, g.role), Rules: g.roleRules}
	if err := apply(ctx, r.client, role); err != nil {
		return err
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: objectMeta(w, w.Namespace, g.role),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: g.role},
		Subjects:   subjects,
	}
	return r.applyBinding(ctx, rb, &rbacv1.RoleBinding{}, rb.RoleRef)
}

// applyBinding applies a (Cluster)RoleBinding. A binding's roleRef cannot
// change, so when the API server refuses the apply because a binding of
// the same name refers to another role, that binding is deleted and the
// apply repeated.
func (r *Reconciler[T]) applyBinding(ctx context.Context, binding, existing client.Object, ref rbacv1.RoleRef) error {
	err := apply(ctx, r.client, binding)
	if !apierrors.IsInvalid(err) {
		return err
	}
	if getErr := r.opts.reader.Get(ctx, client.ObjectKeyFromObject(binding), existing); getErr != nil || roleRefOf(existing) == ref {
		return err
	}
	if err := r.client.Delete(ctx, existing); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replace binding %s that refers to another role: %w", client.ObjectKeyFromObject(binding), err)
	}
	return apply(ctx, r.client, binding)
}

func roleRefOf(o client.Object) rbacv1.RoleRef {
	switch b := o.(type) {
	case *rbacv1.ClusterRoleBinding:
		return b.RoleRef
	case *rbacv1.RoleBinding:
		return b.RoleRef
	}
	return rbacv1.RoleRef{}
}

// secretAccess returns spec.accessPolicy.secrets, empty when unset.
func secretAccess(spec *providerv1alpha1.DeploymentSpec) providerv1alpha1.SecretAccess {
	if spec.AccessPolicy == nil {
		return ""
	}
	return spec.AccessPolicy.Secrets
}
