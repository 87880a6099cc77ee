package mcpaccess_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/internal/operator/mcpaccess"
)

const timeout = 60 * time.Second

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

func serviceProvider(t *testing.T, name string) *providerv1alpha1.ServiceProvider {
	t.Helper()
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: name}}
	sp.Spec.Image = "example.com/" + name + ":v1"
	create(t, optest.Platform.Client, sp)
	return sp
}

// mcpNamespace creates the platform namespace of the MCP tenant/name with
// the MCP's own ClusterRequest and AccessRequest, as the MCP controller
// makes them.
func mcpNamespace(t *testing.T, tenant, name string) string {
	t.Helper()
	ns := corev2alpha1.StableMCPNamespace(tenant, name)
	labels := map[string]string{corev2alpha1.MCPNameLabel: name, corev2alpha1.MCPNamespaceLabel: tenant}
	create(t, optest.Platform.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})
	create(t, optest.Platform.Client, &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeMCP},
	})
	create(t, optest.Platform.Client, accessRequest(ns, name+".admin", labels))
	return ns
}

func accessRequest(ns, name string, labels map[string]string) *clustersv1alpha1.AccessRequest {
	return &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: clustersv1alpha1.AccessRequestSpec{
			RequestRef: &common.ObjectReference{Name: "demo", Namespace: ns},
			Token:      &clustersv1alpha1.TokenConfig{RoleRefs: []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "view"}}},
		},
	}
}

func managedBy(provider string) map[string]string {
	return map[string]string{providerv1alpha1.ManagedByLabel: provider}
}

// subjects returns the ServiceAccounts the providers' RoleBinding in ns
// binds, as "namespace/name".
func subjects(ctx context.Context, ns string) ([]string, error) {
	b := &rbacv1.RoleBinding{}
	if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mcpaccess.RoleName}, b); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range b.Subjects {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out, nil
}

// isPolicyDenial reports whether err is the admission policy's refusal.
func isPolicyDenial(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+mcpaccess.RequestsPolicyName+"'")
}

// TestProviderRequestsInMCPNamespaces is issue #11 items 1 and 3, played
// with the providers' own identities against the API server: every
// ServiceProvider's run ServiceAccount may do in an MCP namespace what
// openMCP's clusteraccess library does (read the namespace, read the MCP's
// ClusterRequest, write its own requests), and nothing on Secrets; the
// admission policy refuses a provider touching the MCP's requests or
// another provider's, or taking the MCP's request names.
func TestProviderRequestsInMCPNamespaces(t *testing.T) {
	optest.StartEnv(t)
	ctx := t.Context()
	operatorNS := optest.NewNamespace(t, "mcpaccess-system")
	serviceProvider(t, "mcpa-a")
	serviceProvider(t, "mcpa-b")
	demo := mcpNamespace(t, "mcpaccess-tenant", "demo")
	optest.StartManagerFor(t, []string{operatorNS, demo}, func(mgr ctrl.Manager) error {
		return mcpaccess.Setup(mgr, operatorNS)
	})
	a, b := optest.Platform.ActAs(t, "sp-mcpa-a", "sp-mcpa-a"), optest.Platform.ActAs(t, "sp-mcpa-b", "sp-mcpa-b")

	optest.Eventually(t, timeout, "both providers bound in "+demo, func(ctx context.Context) (bool, error) {
		got, err := subjects(ctx, demo)
		return slices.Equal(got, []string{"sp-mcpa-a/sp-mcpa-a", "sp-mcpa-b/sp-mcpa-b"}), err
	})

	// The API server loads a new admission policy after a moment.
	optest.Eventually(t, timeout, "the admission policy in force", func(ctx context.Context) (bool, error) {
		err := a.Create(ctx, accessRequest(demo, "probe", nil), client.DryRunAll)
		if isPolicyDenial(err) {
			return true, nil
		}
		return false, fmt.Errorf("unlabelled AccessRequest by provider a: %w", err)
	})

	// What the library does, as provider a.
	optest.Eventually(t, timeout, "provider a creates its own AccessRequest in "+demo, func(ctx context.Context) (bool, error) {
		return true, a.Create(ctx, accessRequest(demo, "mcpa-a--demo--mcp", managedBy("mcpa-a")))
	})
	if err := a.Get(ctx, client.ObjectKey{Name: demo}, &corev1.Namespace{}); err != nil {
		t.Errorf("provider a gets the MCP namespace: %v", err)
	}
	if err := a.Get(ctx, client.ObjectKey{Namespace: demo, Name: "demo"}, &clustersv1alpha1.ClusterRequest{}); err != nil {
		t.Errorf("provider a reads the MCP's ClusterRequest: %v", err)
	}
	create(t, a, &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "mcpa-a--demo--workload", Namespace: demo, Labels: managedBy("mcpa-a")},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeWorkload},
	})
	mine := &clustersv1alpha1.AccessRequest{}
	if err := a.Get(ctx, client.ObjectKey{Namespace: demo, Name: "mcpa-a--demo--mcp"}, mine); err != nil {
		t.Fatal(err)
	}
	mine.Finalizers = append(mine.Finalizers, "clusteraccess.openmcp.cloud/finalizer")
	mine.Labels["openmcp.cloud/managed-purpose"] = "mcpaccess-tenant.demo.mcp"
	if err := a.Update(ctx, mine); err != nil {
		t.Errorf("provider a adds its finalizer and labels to its own AccessRequest: %v", err)
	}
	create(t, b, accessRequest(demo, "mcpa-b--demo--mcp", managedBy("mcpa-b")))

	// What it may not do: RBAC.
	for what, err := range map[string]error{
		"get another namespace":                 a.Get(ctx, client.ObjectKey{Name: operatorNS}, &corev1.Namespace{}),
		"create a namespace":                    a.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mcp--squatted"}}, client.DryRunAll),
		"list Secrets of the MCP namespace":     a.List(ctx, &corev1.SecretList{}, client.InNamespace(demo)),
		"get a Secret of the MCP namespace":     a.Get(ctx, client.ObjectKey{Namespace: demo, Name: "demo.admin.kubeconfig"}, &corev1.Secret{}),
		"create a RoleBinding in the namespace": a.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: demo}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}, client.DryRunAll),
		"write the status of its AccessRequest": a.Status().Update(ctx, mine, client.DryRunAll),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("provider a may not %s: got %v, want Forbidden", what, err)
		}
	}

	// What it may not do: the admission policy. Each attack is played for
	// real (no dry run), so a hole would show as changed objects below.
	relabel := func(c client.Client, key types.NamespacedName, obj client.Object, owner string) error {
		if err := optest.Platform.Client.Get(ctx, key, obj); err != nil {
			return err
		}
		l := obj.GetLabels()
		l[providerv1alpha1.ManagedByLabel] = owner
		obj.SetLabels(l)
		return c.Update(ctx, obj)
	}
	attacks := map[string]func() error{
		"delete the MCP's ClusterRequest": func() error {
			return a.Delete(ctx, &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: demo}})
		},
		"delete the MCP's AccessRequest": func() error {
			return a.Delete(ctx, &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "demo.admin", Namespace: demo}})
		},
		"delete provider b's AccessRequest": func() error {
			return a.Delete(ctx, &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "mcpa-b--demo--mcp", Namespace: demo}})
		},
		"take over provider b's AccessRequest by relabelling it": func() error {
			return relabel(a, types.NamespacedName{Namespace: demo, Name: "mcpa-b--demo--mcp"}, &clustersv1alpha1.AccessRequest{}, "mcpa-a")
		},
		"take over the MCP's AccessRequest by labelling it": func() error {
			return relabel(a, types.NamespacedName{Namespace: demo, Name: "demo.admin"}, &clustersv1alpha1.AccessRequest{}, "mcpa-a")
		},
		"give its own AccessRequest to provider b": func() error {
			return relabel(a, types.NamespacedName{Namespace: demo, Name: "mcpa-a--demo--mcp"}, &clustersv1alpha1.AccessRequest{}, "mcpa-b")
		},
		"create an unlabelled AccessRequest": func() error {
			return a.Create(ctx, accessRequest(demo, "unlabelled", nil))
		},
		"create an AccessRequest in provider b's name": func() error {
			return a.Create(ctx, accessRequest(demo, "framed", managedBy("mcpa-b")))
		},
		"create an AccessRequest looking like the MCP controller's": func() error {
			return a.Create(ctx, accessRequest(demo, "forged", map[string]string{
				providerv1alpha1.ManagedByLabel: "marketplane-operator", corev2alpha1.MCPNameLabel: "demo", corev2alpha1.MCPNamespaceLabel: "mcpaccess-tenant"}))
		},
		"create an AccessRequest named like the MCP's tokens": func() error {
			return a.Create(ctx, accessRequest(demo, "demo.viewer", managedBy("mcpa-a")))
		},
	}
	for what, attack := range attacks {
		if err := attack(); !isPolicyDenial(err) {
			t.Errorf("provider a may not %s: got %v, want Forbidden by %s", what, err, mcpaccess.RequestsPolicyName)
		}
	}
	// Nothing changed.
	for _, key := range []string{"demo.admin", "mcpa-b--demo--mcp", "mcpa-a--demo--mcp"} {
		ar := &clustersv1alpha1.AccessRequest{}
		if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: demo, Name: key}, ar); err != nil {
			t.Errorf("AccessRequest %s after the attacks: %v", key, err)
			continue
		}
		want := map[string]string{"demo.admin": "", "mcpa-b--demo--mcp": "mcpa-b", "mcpa-a--demo--mcp": "mcpa-a"}[key]
		if got := ar.Labels[providerv1alpha1.ManagedByLabel]; got != want || !ar.DeletionTimestamp.IsZero() {
			t.Errorf("AccessRequest %s after the attacks: managed-by %q, deleting %v; want %q, not deleting", key, got, !ar.DeletionTimestamp.IsZero(), want)
		}
	}
	if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: demo, Name: "demo"}, &clustersv1alpha1.ClusterRequest{}); err != nil {
		t.Errorf("the MCP's ClusterRequest after the attacks: %v", err)
	}
	for _, name := range []string{"unlabelled", "framed", "forged", "demo.viewer"} {
		if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: demo, Name: name}, &clustersv1alpha1.AccessRequest{}); !apierrors.IsNotFound(err) {
			t.Errorf("AccessRequest %s: got %v, want NotFound", name, err)
		}
	}

	// Its own requests it may delete.
	if err := a.Delete(ctx, &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: "mcpa-a--demo--workload", Namespace: demo}}); err != nil {
		t.Errorf("provider a deletes its own ClusterRequest: %v", err)
	}

	t.Run("ProvidersComeAndGo", func(t *testing.T) {
		c := serviceProvider(t, "mcpa-c")
		optest.Eventually(t, timeout, "provider c bound in "+demo, func(ctx context.Context) (bool, error) {
			got, err := subjects(ctx, demo)
			return slices.Contains(got, "sp-mcpa-c/sp-mcpa-c"), err
		})
		optest.Eventually(t, timeout, "provider c writes its own requests", func(ctx context.Context) (bool, error) {
			return true, optest.Platform.ActAs(t, "sp-mcpa-c", "sp-mcpa-c").Create(ctx, accessRequest(demo, "mcpa-c--demo--mcp", managedBy("mcpa-c")), client.DryRunAll)
		})
		if err := optest.Platform.Client.Delete(ctx, c); err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, timeout, "provider c unbound from "+demo, func(ctx context.Context) (bool, error) {
			got, err := subjects(ctx, demo)
			return err == nil && !slices.Contains(got, "sp-mcpa-c/sp-mcpa-c"), err
		})
		optest.Eventually(t, timeout, "the ServiceAccounts of a deleted provider are refused by the policy", func(ctx context.Context) (bool, error) {
			err := optest.Platform.ActAs(t, "sp-mcpa-c", "sp-mcpa-c").Delete(ctx, &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "mcpa-b--demo--mcp", Namespace: demo}}, client.DryRunAll)
			return apierrors.IsForbidden(err), nil
		})
	})

	t.Run("NewMCPNamespace", func(t *testing.T) {
		// A namespace created after the controller started gets the Role.
		other := mcpNamespace(t, "mcpaccess-tenant", "other")
		optest.Eventually(t, timeout, "the providers' Role in "+other, func(ctx context.Context) (bool, error) {
			role := &rbacv1.Role{}
			if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: other, Name: mcpaccess.RoleName}, role); err != nil {
				return false, err
			}
			got, err := subjects(ctx, other)
			return equality.Semantic.DeepEqual(role.Rules, mcpaccess.Rules(other)) && len(got) >= 2, err
		})
	})

	t.Run("EditedRoleIsRestored", func(t *testing.T) {
		role := &rbacv1.Role{}
		if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: demo, Name: mcpaccess.RoleName}, role); err != nil {
			t.Fatal(err)
		}
		role.Rules = nil
		if err := optest.Platform.Client.Update(ctx, role); err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, timeout, "the Role restored", func(ctx context.Context) (bool, error) {
			if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(role), role); err != nil {
				return false, err
			}
			return len(role.Rules) == len(mcpaccess.Rules(demo)), nil
		})
	})
}
