package provider_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/marketplane/marketplane/api/crds"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/internal/operator/provider"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// tenantGroup is the API group of the service kinds of the tenant-role
// tests; no other test registers it.
const tenantGroup = "tenantroles.services.openmcp.cloud"

// tenantProvider is the ServiceProvider of TestTenantRoles.
const tenantProvider = "tr-sample"

// readyDeployer runs every provider at once: the tenant-role tests care
// about what the reconciler writes on the onboarding cluster, not about the
// provider's workloads.
type readyDeployer struct{}

func (readyDeployer) Init(context.Context, *deploy.Workload) (deploy.InitStatus, error) {
	return deploy.InitStatus{State: deploy.InitSucceeded}, nil
}

func (readyDeployer) Run(context.Context, *deploy.Workload) (deploy.RunStatus, error) {
	return deploy.RunStatus{Ready: true}, nil
}

func (readyDeployer) Remove(context.Context, *deploy.Workload) (bool, error) { return true, nil }

// serviceKindCRD is a CRD of the tenant-role tests' group with a
// schemaless spec, labelled for cluster (none when empty).
func serviceKindCRD(kind, plural string, scope apiextensionsv1.ResourceScope, cluster string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + tenantGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: tenantGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
	if cluster != "" {
		crd.Labels = map[string]string{crds.ClusterLabel: cluster}
	}
	return crd
}

// installCRDs creates crds on the suite's API server (the onboarding
// cluster of these tests), waits until they are established and deletes
// them when the test ends.
func installCRDs(t *testing.T, list ...*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	for _, crd := range list {
		create(t, crd)
	}
	for _, crd := range list {
		eventually(t, "CRD "+crd.Name+" established", func(ctx context.Context) (bool, string, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, err.Error(), nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("conditions %+v", got.Status.Conditions), nil
		})
	}
}

func gvk(kind string) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: tenantGroup, Version: "v1alpha1", Kind: kind}
}

// waitForTenantRoles waits until the tenant ClusterRole name on the
// onboarding cluster has exactly the rules want and the labels of a tenant
// role of tenantProvider that aggregates to aggregateTo.
func waitForTenantRoles(t *testing.T, name string, want []rbacv1.PolicyRule, aggregateTo ...string) {
	t.Helper()
	eventually(t, "ClusterRole "+name, func(ctx context.Context) (bool, string, error) {
		role := &rbacv1.ClusterRole{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
			return false, err.Error(), nil
		}
		if d := cmp.Diff(want, role.Rules); d != "" {
			return false, "rules (-want +got):\n" + d, nil
		}
		labels := map[string]string{
			providerv1alpha1.ManagedByLabel:      provider.ManagedByValue,
			providerv1alpha1.ManagedPurposeLabel: provider.PurposeTenantRole,
			provider.LabelProviderKind:           "ServiceProvider",
			provider.LabelProviderName:           tenantProvider,
		}
		for _, l := range aggregateTo {
			labels[l] = "true"
		}
		if d := cmp.Diff(labels, role.Labels); d != "" {
			return false, "labels (-want +got):\n" + d, nil
		}
		if len(role.OwnerReferences) != 0 {
			// The owner lives on another cluster; the garbage collector
			// of this one would delete the role.
			return false, fmt.Sprintf("owner references %+v", role.OwnerReferences), nil
		}
		return true, "", nil
	})
}

// waitForNoTenantRoles waits until none of the named ClusterRoles exists
// on the onboarding cluster.
func waitForNoTenantRoles(t *testing.T, names ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("ClusterRoles %v gone", names), func(ctx context.Context) (bool, string, error) {
		var objs []client.Object
		for _, n := range names {
			objs = append(objs, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		gone, left := notFound(ctx, objs...)
		return gone, left, nil
	})
}

// TestTenantRoles runs a ServiceProvider reconciler with tenant roles on a
// platform cluster of its own, with the suite's API server as the
// onboarding cluster, whose kube-controller-manager aggregates ClusterRoles.
// A provider registers two namespaced service kinds, a kind labelled for the
// platform cluster, a cluster-scoped kind, a kind the onboarding cluster
// does not serve and a kind of a group it does not own: the view and edit
// roles name exactly the two service kinds, and through the built-in edit
// and view roles a tenant's editor can create one while a viewer can list
// but not create. The roles follow status.resources and go with the
// provider.
func TestTenantRoles(t *testing.T) {
	needsPlatform(t)
	t.Parallel()
	installCRDs(t,
		serviceKindCRD("Widget", "widgets", apiextensionsv1.NamespaceScoped, crds.ClusterOnboarding),
		serviceKindCRD("Gadget", "gadgets", apiextensionsv1.NamespaceScoped, ""),
		serviceKindCRD("WidgetConfig", "widgetconfigs", apiextensionsv1.NamespaceScoped, crds.ClusterPlatform),
		serviceKindCRD("WidgetClass", "widgetclasses", apiextensionsv1.ClusterScoped, crds.ClusterOnboarding),
	)
	tp := testenv.Start(t, testenv.WithName("tenant-platform"))
	if err := tp.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: provider.DefaultOperatorNamespace}}); err != nil {
		t.Fatal(err)
	}
	// A client of its own, so that its REST mapper discovers the kinds
	// installed above.
	onboarding, err := client.New(platform.Config, client.Options{Scheme: platform.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	startTenantRoleManager(t, tp, func(context.Context) (client.Client, error) { return onboarding, nil })

	const name = tenantProvider
	view, edit := "marketplane:sp-"+name+":view", "marketplane:sp-"+name+":edit"
	sp := serviceProvider(name, nil)
	if err := tp.Client.Create(t.Context(), sp); err != nil {
		t.Fatal(err)
	}
	waitForReady(t, tp.Client, sp)
	register(t, tp.Client, name, gvk("Widget"), gvk("Gadget"), gvk("WidgetConfig"), gvk("WidgetClass"), gvk("Missing"),
		metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})

	viewRules := func(resources ...string) []rbacv1.PolicyRule {
		var withStatus []string
		for _, r := range resources {
			withStatus = append(withStatus, r, r+"/status")
		}
		return []rbacv1.PolicyRule{{APIGroups: []string{tenantGroup}, Resources: withStatus, Verbs: []string{"get", "list", "watch"}}}
	}
	editRules := func(resources ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{tenantGroup}, Resources: resources, Verbs: []string{"create", "update", "patch", "delete", "deletecollection"}}}
	}
	waitForTenantRoles(t, view, viewRules("gadgets", "widgets"), provider.AggregateToViewLabel, provider.AggregateToEditLabel, provider.AggregateToAdminLabel)
	waitForTenantRoles(t, edit, editRules("gadgets", "widgets"), provider.AggregateToEditLabel, provider.AggregateToAdminLabel)

	t.Run("BuiltInRoles", func(t *testing.T) {
		// A tenant namespace with an editor and a viewer, bound to the
		// built-in roles as an openMCP workspace role would bind them.
		ns := "tr-tenant"
		create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		for sa, role := range map[string]string{"editor": "edit", "viewer": "view"} {
			create(t, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
			})
		}
		editor, viewer := platform.ActAs(t, ns, "editor"), platform.ActAs(t, ns, "viewer")
		object := func(kind, objName string) *unstructured.Unstructured {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(tenantGroup + "/v1alpha1")
			u.SetKind(kind)
			u.SetNamespace(ns)
			u.SetName(objName)
			return u
		}
		// The clusterrole-aggregation controller adds the rules to edit
		// and view shortly after the roles appeared.
		eventually(t, "the editor creates a Widget through the built-in edit role", func(ctx context.Context) (bool, string, error) {
			err := editor.Create(ctx, object("Widget", "w1"))
			if apierrors.IsForbidden(err) {
				return false, err.Error(), nil
			}
			return true, "", err
		})
		eventually(t, "the viewer lists Widgets through the built-in view role", func(ctx context.Context) (bool, string, error) {
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion(tenantGroup + "/v1alpha1")
			list.SetKind("WidgetList")
			err := viewer.List(ctx, list, client.InNamespace(ns))
			if apierrors.IsForbidden(err) {
				return false, err.Error(), nil
			}
			if err == nil && len(list.Items) != 1 {
				return false, fmt.Sprintf("%d Widgets, want 1", len(list.Items)), nil
			}
			return true, "", err
		})
		ctx := t.Context()
		checkForbidden(t, "the viewer creates a Widget", viewer.Create(ctx, object("Widget", "w2")), true)
		checkForbidden(t, "the editor creates a WidgetConfig (a platform kind)", editor.Create(ctx, object("WidgetConfig", "c1")), true)
		checkForbidden(t, "the editor reads Gadgets", editor.Get(ctx, client.ObjectKey{Namespace: ns, Name: "none"}, object("Gadget", "none")), false)
	})

	// A kind the provider no longer registers leaves both roles.
	register(t, tp.Client, name, gvk("Widget"))
	waitForTenantRoles(t, view, viewRules("widgets"), provider.AggregateToViewLabel, provider.AggregateToEditLabel, provider.AggregateToAdminLabel)
	waitForTenantRoles(t, edit, editRules("widgets"), provider.AggregateToEditLabel, provider.AggregateToAdminLabel)

	// No kinds left, no roles.
	register(t, tp.Client, name)
	waitForNoTenantRoles(t, view, edit)

	// Deleting the provider removes its roles, first of everything. (This
	// platform cluster has no namespace controller, so the provider's
	// namespace, removed last, and with it the provider stay.)
	register(t, tp.Client, name, gvk("Widget"))
	waitForTenantRoles(t, edit, editRules("widgets"), provider.AggregateToEditLabel, provider.AggregateToAdminLabel)
	if err := tp.Client.Delete(t.Context(), sp); err != nil {
		t.Fatal(err)
	}
	waitForNoTenantRoles(t, view, edit)
}

// TestTenantRolesOff shows that without WithTenantRoles (the operator's
// --aggregate-tenant-roles=false) the reconciler writes no tenant roles:
// the suite's reconcilers run without it, on the API server the other
// tenant-role test uses as its onboarding cluster.
func TestTenantRolesOff(t *testing.T) {
	needsPlatform(t)
	ownGroups(t)
	installCRDs(t, serviceKindCRD("Gizmo", "gizmos", apiextensionsv1.NamespaceScoped, crds.ClusterOnboarding))
	const name = "tr-off"
	sp := serviceProvider(name, nil)
	create(t, sp)
	// A reserved entry next to the service kind: its rejection shows that
	// the reconcile after the registration ran, the one that would have
	// written the roles.
	register(t, k8s, name, gvk("Gizmo"), metav1.GroupVersionKind{Version: "v1", Kind: "Secret"})
	waitForConditions(t, sp, want{Type: provider.ConditionResourcesAccepted, Status: metav1.ConditionFalse, Reason: policy.ReasonGroupReserved})
	list := &rbacv1.ClusterRoleList{}
	if err := k8s.List(t.Context(), list, client.MatchingLabels{providerv1alpha1.ManagedPurposeLabel: provider.PurposeTenantRole, provider.LabelProviderName: name}); err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Items {
		t.Errorf("tenant role %s written without tenant roles", r.Name)
	}
	if gone, left := notFound(t.Context(),
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "marketplane:sp-" + name + ":view"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "marketplane:sp-" + name + ":edit"}}); !gone {
		t.Errorf("tenant roles written without tenant roles: %s", left)
	}
}

// startTenantRoleManager runs a ServiceProvider reconciler with tenant
// roles on onboarding against the platform cluster tp until the test ends.
func startTenantRoleManager(t *testing.T, tp *testenv.Cluster, onboarding provider.OnboardingClient) {
	t.Helper()
	mgr, err := ctrl.NewManager(tp.Config, ctrl.Options{
		Scheme:  tp.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// The suite's manager runs a controller of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := provider.NewReconciler(mgr.GetClient(), readyDeployer{}, provider.ServiceProviders(),
		provider.WithAPIReader(mgr.GetAPIReader()),
		provider.WithWaitInterval(250*time.Millisecond),
		provider.WithMissingSecretInterval(time.Second),
		provider.WithTenantRoles(onboarding))
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager: %v", err)
		}
	})
}

// waitForReady waits until the ServiceProvider sp, read with c, is Ready.
func waitForReady(t *testing.T, c client.Client, sp *providerv1alpha1.ServiceProvider) {
	t.Helper()
	eventually(t, "ServiceProvider "+sp.Name+" ready", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false, err.Error(), nil
		}
		return apimeta.IsStatusConditionTrue(sp.Status.Conditions, string(providerv1alpha1.ConditionReady)), fmt.Sprintf("%+v", sp.Status.Conditions), nil
	})
}
