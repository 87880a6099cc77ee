package mcpaccess

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/internal/operator/provider"
)

// ControllerName names the controller, its metrics and its logs.
const ControllerName = "mcpaccess"

// RoleName names the Role and the RoleBinding in every MCP namespace.
const RoleName = "marketplane:provider-mcp-requests"

// sharedKey is the reconcile request for what belongs to all MCP
// namespaces at once: the admission policy, its binding and its parameter.
// Namespaces are cluster-scoped, so their requests never have a namespace
// and cannot collide with it.
var sharedKey = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "marketplane-mcpaccess", Name: "admission"}}

var _ reconcile.Reconciler = &Reconciler{}

// Reconciler keeps the providers' Role and RoleBinding in every MCP
// namespace and the admission policy that protects the requests there.
type Reconciler struct {
	client            client.Client
	operatorNamespace string
}

// Setup registers the controller with mgr. operatorNamespace holds the
// admission policy's parameter, the ConfigMap RequestOwnersConfigMapName
// (provider.DefaultOperatorNamespace when empty).
func Setup(mgr ctrl.Manager, operatorNamespace string) error {
	if operatorNamespace == "" {
		operatorNamespace = provider.DefaultOperatorNamespace
	}
	r := &Reconciler{client: mgr.GetClient(), operatorNamespace: operatorNamespace}
	return r.SetupWithManager(mgr)
}

// SetupWithManager registers r with mgr. It watches the MCP namespaces,
// the ServiceProviders (one coming or going changes every namespace's
// binding and the policy's parameter) and the Roles and RoleBindings it
// writes (an edited or deleted one is restored).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	isMCP := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			return false
		}
		_, ok = corev2alpha1.MCPOfNamespace(ns)
		return ok
	})
	// Only which ServiceProviders exist matters here, not their spec or
	// status.
	comesOrGoes := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	ours := predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetName() == RoleName })
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Namespace{}, builder.WithPredicates(isMCP)).
		Watches(&providerv1alpha1.ServiceProvider{}, handler.EnqueueRequestsFromMapFunc(r.everything), builder.WithPredicates(comesOrGoes)).
		Watches(&rbacv1.Role{}, handler.EnqueueRequestsFromMapFunc(namespaceOf), builder.WithPredicates(ours)).
		Watches(&rbacv1.RoleBinding{}, handler.EnqueueRequestsFromMapFunc(namespaceOf), builder.WithPredicates(ours)).
		Complete(r)
}

func namespaceOf(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetNamespace()}}}
}

// everything returns the shared objects and every MCP namespace.
func (r *Reconciler) everything(ctx context.Context, _ client.Object) []reconcile.Request {
	out := []reconcile.Request{sharedKey}
	list := &corev1.NamespaceList{}
	if err := r.client.List(ctx, list, client.HasLabels{corev2alpha1.MCPNameLabel}); err != nil {
		logf.FromContext(ctx).Error(err, "List MCP namespaces")
		return out
	}
	for i := range list.Items {
		if _, ok := corev2alpha1.MCPOfNamespace(&list.Items[i]); ok {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	}
	return out
}

// Reconcile applies the Role and RoleBinding of one MCP namespace, or the
// shared admission objects.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	providers, err := r.serviceProviders(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if req == sharedKey {
		return ctrl.Result{}, r.ensureAdmission(ctx, providers)
	}
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, req.NamespacedName, ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, ok := corev2alpha1.MCPOfNamespace(ns); !ok || !ns.DeletionTimestamp.IsZero() {
		// Not (or no longer) an MCP namespace; what is in a terminating
		// one goes with it.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.ensureRole(ctx, ns.Name, providers)
}

// serviceProviders returns the names of the ServiceProviders that get
// rights in MCP namespaces, sorted: all but one named like the operator's
// own managed-by value, which marks the MCP controller's requests there.
func (r *Reconciler) serviceProviders(ctx context.Context) ([]string, error) {
	list := &providerv1alpha1.ServiceProviderList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list ServiceProviders: %w", err)
	}
	var names []string
	for _, sp := range list.Items {
		if sp.Name != provider.ManagedByValue {
			names = append(names, sp.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Rules returns the rules of the providers' Role in the MCP namespace ns:
// what openMCP's clusteraccess library does there. It reads the namespace
// (it creates it only when missing, which it never is), reads the MCP's
// ClusterRequest, and creates, labels, finalizes and deletes its own
// ClusterRequests and AccessRequests. No Secrets: the kubeconfig Secret of
// each of its granted AccessRequests gets its own Role (internal/operator/access).
func Rules(ns string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{ns}, Verbs: []string{"get"}},
		{APIGroups: []string{clustersv1alpha1.GroupName}, Resources: []string{"clusterrequests", "accessrequests"},
			Verbs: []string{"create", "get", "list", "watch", "update", "patch", "delete"}},
	}
}

// ensureRole applies the Role and the RoleBinding of the MCP namespace ns
// for the run ServiceAccounts of providers. A namespace's "get" needs a
// ClusterRole in RBAC, which would then hold for every namespace; a Role
// in ns naming ns itself grants it for that one namespace only.
func (r *Reconciler) ensureRole(ctx context.Context, ns string, providers []string) error {
	labels := map[string]string{providerv1alpha1.ManagedByLabel: provider.ManagedByValue}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: ns, Labels: labels}, Rules: Rules(ns)}
	if err := provider.Apply(ctx, r.client, role); err != nil {
		return err
	}
	subjects := []rbacv1.Subject{}
	for _, name := range providers {
		saNS, sa, _ := provider.RunServiceAccount(policy.KindServiceProvider, name)
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: saNS})
	}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: RoleName}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: ns, Labels: labels}, RoleRef: ref, Subjects: subjects}
	err := provider.Apply(ctx, r.client, binding)
	if apierrors.IsInvalid(err) {
		// roleRef is immutable: someone pointed ours elsewhere.
		old := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: ns}}
		if derr := r.client.Delete(ctx, old); client.IgnoreNotFound(derr) != nil {
			return fmt.Errorf("replace RoleBinding %s/%s: %w", ns, RoleName, derr)
		}
		err = provider.Apply(ctx, r.client, binding)
	}
	if err != nil {
		return err
	}
	logf.FromContext(ctx).V(2).Info("Providers bound in MCP namespace", "namespace", ns, "providers", strings.Join(providers, ","))
	return nil
}

// ensureAdmission applies the admission policy, its binding and its
// parameter, which maps the namespace of each ServiceProvider to its name.
func (r *Reconciler) ensureAdmission(ctx context.Context, providers []string) error {
	data := map[string]string{}
	for _, name := range providers {
		saNS, _, _ := provider.RunServiceAccount(policy.KindServiceProvider, name)
		data[saNS] = name
	}
	labels := map[string]string{providerv1alpha1.ManagedByLabel: provider.ManagedByValue}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: RequestOwnersConfigMapName, Namespace: r.operatorNamespace, Labels: labels},
		Data:       data,
	}
	if err := provider.Apply(ctx, r.client, cm); err != nil {
		return err
	}
	if err := provider.Apply(ctx, r.client, requestsPolicy(labels)); err != nil {
		return err
	}
	return provider.Apply(ctx, r.client, requestsBinding(labels, r.operatorNamespace))
}
