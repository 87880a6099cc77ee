package clusteraccess_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

const providerName = "test-provider"

// readConfigMaps is the permission the tests' provider asks for.
var readConfigMaps = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}

// clustersOf polls Clusters until access is ready and returns it.
func clustersOf(t *testing.T, a spruntime.ClusterAccess[*testObject], obj *testObject) spruntime.ClusterContext {
	t.Helper()
	var cc spruntime.ClusterContext
	eventually(t, "cluster access of "+obj.Namespace+"/"+obj.Name, func(ctx context.Context) error {
		got, ready, err := a.Clusters(ctx, obj)
		switch {
		case err != nil:
			return err
		case !ready:
			return errors.New("not ready")
		}
		cc = got
		return nil
	})
	return cc
}

// allowedOnly checks that c may list ConfigMaps but neither list Secrets
// nor create ConfigMaps.
func allowedOnly(ctx context.Context, c client.Client) error {
	if err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); err != nil {
		return fmt.Errorf("list configmaps (allowed): %w", err)
	}
	switch err := c.List(ctx, &corev1.SecretList{}, client.InNamespace("default")); {
	case err == nil:
		return errors.New("list secrets: allowed, want Forbidden")
	case !apierrors.IsForbidden(err):
		return fmt.Errorf("list secrets: got %w, want Forbidden", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "denied-", Namespace: "default"}}
	switch err := c.Create(ctx, cm); {
	case err == nil:
		return errors.New("create configmap: allowed, want Forbidden")
	case !apierrors.IsForbidden(err):
		return fmt.Errorf("create configmap: got %w, want Forbidden", err)
	}
	return nil
}

// TestMCPAccess runs a provider with the run ServiceAccount's platform
// permissions through the life of a service object's cluster access: no
// MCP, granted access with exactly the requested rules, client reuse, token
// refresh, a permission change, a denied MCP, release, and the shared
// workload cluster surviving it for the next object.
func TestMCPAccess(t *testing.T) {
	l := env(t)
	t.Parallel()
	useMCPCluster(t)
	ns := l.ProviderNamespace(t, "sp-mcp-access")
	pc := providerClient(t, l, ns, "run", runClusterRules, runRoleRules)
	m, err := clusteraccess.New(pc, providerName, ns,
		clusteraccess.WithMCPPermissions(clusteraccess.Permissions{Rules: readConfigMaps}),
		clusteraccess.WithWorkloadCluster(clusteraccess.Permissions{Rules: readConfigMaps}))
	if err != nil {
		t.Fatal(err)
	}
	access := clusteraccess.For[*testObject](m)
	obj := newObject("team-a", "tenant-a")
	arKey := client.ObjectKey{Namespace: ns, Name: clusteraccess.MCPAccessRequestName(providerName, obj.Namespace, obj.Name)}
	ctx := t.Context()

	t.Run("NoMCP", func(t *testing.T) {
		_, ready, err := access.Clusters(ctx, obj)
		if ready || !errors.Is(err, clusteraccess.ErrMCPNotFound) {
			t.Fatalf("Clusters() = ready %v, %v; want not ready, ErrMCPNotFound", ready, err)
		}
		uerr, ok := spruntime.AsInvalidUserInput(err)
		if !ok || uerr.Reason != clusteraccess.ReasonMCPNotFound {
			t.Errorf("Clusters() error %v is not an InvalidUserInput with reason %s", err, clusteraccess.ReasonMCPNotFound)
		}
		if err := l.Platform.Client.Get(ctx, arKey, &clustersv1alpha1.AccessRequest{}); !apierrors.IsNotFound(err) {
			t.Errorf("AccessRequest %s: got %v, want NotFound (none is made without an MCP)", arKey, err)
		}
	})

	mcp := l.CreateMCP(t, obj.Name, obj.Namespace)
	var first spruntime.ClusterContext

	t.Run("Granted", func(t *testing.T) {
		first = clustersOf(t, access, obj)
		if first.MCPCluster == nil || first.WorkloadCluster == nil {
			t.Fatalf("ClusterContext = %+v, want both clusters", first)
		}
		if got := first.MCPCluster.Name(); got != mcp.ClusterName {
			t.Errorf("MCPCluster.Name() = %q, want the MCP's Cluster %q", got, mcp.ClusterName)
		}
		ar := &clustersv1alpha1.AccessRequest{}
		if err := l.Platform.Client.Get(ctx, arKey, ar); err != nil {
			t.Fatalf("AccessRequest: %v", err)
		}
		type request struct {
			OnboardingName, OnboardingNamespace, Purpose string
			RequestRef                                   *common.ObjectReference
			Token                                        *clustersv1alpha1.TokenConfig
		}
		want := request{
			OnboardingName: obj.Name, OnboardingNamespace: obj.Namespace, Purpose: "mcp",
			RequestRef: &common.ObjectReference{Name: obj.Name, Namespace: corev2alpha1.StableMCPNamespace(obj.Namespace, obj.Name)},
			Token:      &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: readConfigMaps}}},
		}
		got := request{
			OnboardingName: ar.Labels[providerv1alpha1.OnboardingNameLabel], OnboardingNamespace: ar.Labels[providerv1alpha1.OnboardingNamespaceLabel],
			Purpose: ar.Labels[providerv1alpha1.ManagedPurposeLabel], RequestRef: ar.Spec.RequestRef, Token: ar.Spec.Token,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("AccessRequest %s (-want +got):\n%s", arKey, diff)
		}

		// The client reaches the tenant's MCP cluster, with the requested
		// rules and nothing more.
		mark := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-by-tenant", Namespace: "default"}}
		if err := mcp.Client.Create(ctx, mark); err != nil {
			t.Fatal(err)
		}
		if err := first.MCPCluster.Client().Get(ctx, client.ObjectKeyFromObject(mark), &corev1.ConfigMap{}); err != nil {
			t.Errorf("the MCP client does not see the tenant's ConfigMap: %v", err)
		}
		eventually(t, "MCP permissions", func(ctx context.Context) error { return allowedOnly(ctx, first.MCPCluster.Client()) })
		eventually(t, "workload permissions", func(ctx context.Context) error { return allowedOnly(ctx, first.WorkloadCluster.Client()) })
		if err := first.WorkloadCluster.Client().Get(ctx, client.ObjectKeyFromObject(mark), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("the workload client sees the MCP's ConfigMap (%v): it is not the workload cluster", err)
		}
	})

	t.Run("ClientsReused", func(t *testing.T) {
		again := clustersOf(t, access, obj)
		if again.MCPCluster != first.MCPCluster || again.WorkloadCluster != first.WorkloadCluster {
			t.Errorf("Clusters() built new clusters although the Secrets did not change")
		}
	})

	t.Run("TokenRefresh", func(t *testing.T) {
		ar := &clustersv1alpha1.AccessRequest{}
		if err := l.Platform.Client.Get(ctx, arKey, ar); err != nil {
			t.Fatal(err)
		}
		// A deleted Secret is written anew by the operator, with a new
		// token: the same as a refresh.
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ar.Status.SecretRef.Name, Namespace: ns}}
		if err := l.Platform.Client.Delete(ctx, secret); err != nil {
			t.Fatal(err)
		}
		var refreshed spruntime.ClusterContext
		eventually(t, "a new client after the token refresh", func(ctx context.Context) error {
			cc, ready, err := access.Clusters(ctx, obj)
			switch {
			case err != nil:
				return fmt.Errorf("Clusters(): %w", err)
			case !ready:
				return errors.New("Clusters(): not ready")
			}
			if cc.MCPCluster == first.MCPCluster {
				return errors.New("still the old client")
			}
			refreshed = cc
			return nil
		})
		if refreshed.MCPCluster.RESTConfig().BearerToken == first.MCPCluster.RESTConfig().BearerToken {
			t.Errorf("the new client uses the old token")
		}
		if refreshed.WorkloadCluster != first.WorkloadCluster {
			t.Errorf("the workload client changed although its Secret did not")
		}
		eventually(t, "the new client works", func(ctx context.Context) error { return allowedOnly(ctx, refreshed.MCPCluster.Client()) })
		first = refreshed
	})

	t.Run("PermissionsChange", func(t *testing.T) {
		// A new version of the provider asks for more: the existing
		// AccessRequest is updated and the access waits for it.
		more := append([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}}, readConfigMaps...)
		m2, err := clusteraccess.New(pc, providerName, ns,
			clusteraccess.WithMCPPermissions(clusteraccess.Permissions{Rules: more}),
			clusteraccess.WithWorkloadCluster(clusteraccess.Permissions{Rules: readConfigMaps}))
		if err != nil {
			t.Fatal(err)
		}
		cc := clustersOf(t, clusteraccess.For[*testObject](m2), obj)
		eventually(t, "listing secrets is allowed", func(ctx context.Context) error {
			return cc.MCPCluster.Client().List(ctx, &corev1.SecretList{}, client.InNamespace("default"))
		})
		// And back, for the tests below.
		clustersOf(t, access, obj)
		eventually(t, "listing secrets is forbidden again", func(ctx context.Context) error {
			return allowedOnly(ctx, cc.MCPCluster.Client())
		})
	})

	t.Run("MCPClusterDenied", func(t *testing.T) {
		// The only MCP cluster is taken: a second MCP's ClusterRequest is
		// denied, and so is access for its service object.
		other := newObject("team-a", "tenant-denied")
		mcp2 := &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: other.Name, Namespace: other.Namespace}}
		if err := l.Onboarding.Client.Create(ctx, mcp2); err != nil {
			t.Fatal(err)
		}
		defer l.DeleteMCP(t, other.Name, other.Namespace)
		eventually(t, "access denied", func(ctx context.Context) error {
			_, ready, err := access.Clusters(ctx, other)
			switch {
			case err == nil:
				return fmt.Errorf("Clusters() = ready %v, no error; want ErrAccessDenied", ready)
			case !errors.Is(err, clusteraccess.ErrAccessDenied):
				return fmt.Errorf("Clusters() = ready %v, %w; want ErrAccessDenied", ready, err)
			}
			return nil
		})
	})

	t.Run("Release", func(t *testing.T) {
		oldToken := first.MCPCluster.Client()
		eventually(t, "release done", func(ctx context.Context) error {
			done, err := access.Release(ctx, obj)
			switch {
			case err != nil:
				return fmt.Errorf("Release(): %w", err)
			case !done:
				return errors.New("Release(): not done")
			}
			return nil
		})
		if err := l.Platform.Client.Get(ctx, arKey, &clustersv1alpha1.AccessRequest{}); !apierrors.IsNotFound(err) {
			t.Errorf("AccessRequest %s: got %v, want NotFound", arKey, err)
		}
		// The API server caches token authentications for a few seconds.
		eventually(t, "the released token is rejected", func(ctx context.Context) error {
			switch err := oldToken.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); {
			case err == nil:
				return errors.New("list with the released token: allowed, want Unauthorized")
			case !apierrors.IsUnauthorized(err):
				return fmt.Errorf("list with the released token: got %w, want Unauthorized", err)
			}
			return nil
		})
		wl := &clustersv1alpha1.AccessRequest{}
		if err := l.Platform.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusteraccess.WorkloadRequestName(providerName)}, wl); err != nil || !wl.DeletionTimestamp.IsZero() {
			t.Errorf("the shared workload AccessRequest must stay: %v, deletionTimestamp %v", err, wl.DeletionTimestamp)
		}
		if err := first.WorkloadCluster.Client().List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); err != nil {
			t.Errorf("the workload client stopped working: %v", err)
		}
	})

	t.Run("WorkloadShared", func(t *testing.T) {
		l.DeleteMCP(t, obj.Name, obj.Namespace)
		next := newObject("team-b", "tenant-b")
		l.CreateMCP(t, next.Name, next.Namespace)
		cc := clustersOf(t, access, next)
		if cc.WorkloadCluster != first.WorkloadCluster {
			t.Errorf("the second object got another workload cluster client")
		}
		list := &clustersv1alpha1.AccessRequestList{}
		if err := l.Platform.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{providerv1alpha1.ManagedPurposeLabel: "workload"}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 {
			t.Errorf("%d workload AccessRequests, want 1 shared by every object", len(list.Items))
		}
		eventually(t, "release of the second object", func(ctx context.Context) error {
			switch done, err := access.Release(ctx, next); {
			case err != nil:
				return fmt.Errorf("Release(): %w", err)
			case !done:
				return errors.New("Release(): not done")
			}
			return nil
		})
	})
}
