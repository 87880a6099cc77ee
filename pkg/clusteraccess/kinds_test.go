package clusteraccess_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// TestMCPAccessOfEveryControlPlane runs a provider with the run
// ServiceAccount's platform permissions against the control planes issue
// #11 added: a core.open-control-plane.io ControlPlane (its ClusterRequest in
// openMCP's platform namespace) and a ManagedControlPlane created by an
// earlier version (its ClusterRequest in the legacy namespace). Both give
// the provider their MCP cluster. The landscape has one MCP cluster, so the
// subtests release it in turn.
func TestMCPAccessOfEveryControlPlane(t *testing.T) {
	l := env(t)
	t.Parallel()
	useMCPCluster(t)
	ns := l.ProviderNamespace(t, "sp-mcp-kinds")
	pc := providerClient(t, l, ns, "run", runClusterRules, runRoleRules)
	m, err := clusteraccess.New(pc, providerName, ns, clusteraccess.WithMCPPermissions(clusteraccess.Permissions{Rules: readConfigMaps}))
	if err != nil {
		t.Fatal(err)
	}
	access := clusteraccess.For[*testObject](m)

	// check gets obj's clusters, checks that they are the control plane's
	// and that the AccessRequest points at the ClusterRequest in
	// platformNS, and releases the access again.
	check := func(t *testing.T, obj *testObject, cp *providertest.MCP, platformNS string) {
		t.Helper()
		cc := clustersOf(t, access, obj)
		if got := cc.MCPCluster.Name(); got != cp.ClusterName {
			t.Errorf("MCPCluster.Name() = %q, want the control plane's Cluster %q", got, cp.ClusterName)
		}
		mark := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mark-" + obj.Name, Namespace: "default"}}
		if err := cp.Client.Create(t.Context(), mark); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the provider sees the tenant's ConfigMap", func(ctx context.Context) error {
			return cc.MCPCluster.Client().Get(ctx, client.ObjectKeyFromObject(mark), &corev1.ConfigMap{})
		})
		ar := &clustersv1alpha1.AccessRequest{}
		arKey := client.ObjectKey{Namespace: ns, Name: clusteraccess.MCPAccessRequestName(providerName, obj.Namespace, obj.Name)}
		if err := l.Platform.Client.Get(t.Context(), arKey, ar); err != nil {
			t.Fatalf("AccessRequest: %v", err)
		}
		if ref := ar.Spec.RequestRef; ref == nil || ref.Namespace != platformNS || ref.Name != obj.Name {
			t.Errorf("AccessRequest requestRef = %+v, want %s/%s", ref, platformNS, obj.Name)
		}
		eventually(t, "access released", func(ctx context.Context) error {
			done, err := access.Release(ctx, obj)
			switch {
			case err != nil:
				return err
			case !done:
				return errors.New("AccessRequest still there")
			}
			return nil
		})
	}

	t.Run("ControlPlane", func(t *testing.T) {
		obj := newObject("tenant-cp", "cp-one")
		cp := l.CreateControlPlane(t, obj.Name, obj.Namespace)
		check(t, obj, cp, corev2alpha1.StableMCPNamespace(obj.Namespace, obj.Name))
		l.DeleteControlPlane(t, obj.Name, obj.Namespace)
	})

	t.Run("LegacyManagedControlPlane", func(t *testing.T) {
		// What an earlier version left: the platform namespace and the
		// ClusterRequest in the legacy namespace, without the annotation
		// or kind label of this version.
		obj := newObject("tenant-old", "old-one")
		legacy := corev2alpha1.LegacyMCPNamespace(obj.Namespace, obj.Name)
		labels := map[string]string{corev2alpha1.MCPNameLabel: obj.Name, corev2alpha1.MCPNamespaceLabel: obj.Namespace}
		if err := l.Platform.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: legacy, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
		cr := &clustersv1alpha1.ClusterRequest{
			ObjectMeta: metav1.ObjectMeta{Name: obj.Name, Namespace: legacy, Labels: labels},
			Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeMCP},
		}
		if err := l.Platform.Client.Create(t.Context(), cr); err != nil {
			t.Fatal(err)
		}
		mcp := l.CreateMCP(t, obj.Name, obj.Namespace)
		check(t, obj, mcp, legacy)
		if err := l.Platform.Client.Get(t.Context(), client.ObjectKey{Name: corev2alpha1.StableMCPNamespace(obj.Namespace, obj.Name)}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("openMCP's namespace of the legacy MCP: got %v, want NotFound (it keeps the legacy one)", err)
		}
		l.DeleteMCP(t, obj.Name, obj.Namespace)
	})

	t.Run("NoControlPlane", func(t *testing.T) {
		// A ClusterRequest in the legacy namespace made for another MCP
		// does not count.
		obj := newObject("tenant-none", "nobody")
		legacy := corev2alpha1.LegacyMCPNamespace(obj.Namespace, obj.Name)
		if err := l.Platform.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: legacy}}); err != nil {
			t.Fatal(err)
		}
		cr := &clustersv1alpha1.ClusterRequest{
			ObjectMeta: metav1.ObjectMeta{Name: obj.Name, Namespace: legacy,
				Labels: map[string]string{corev2alpha1.MCPNameLabel: "someone-else", corev2alpha1.MCPNamespaceLabel: obj.Namespace}},
			Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: "not-scheduled"},
		}
		if err := l.Platform.Client.Create(t.Context(), cr); err != nil {
			t.Fatal(err)
		}
		_, ready, err := access.Clusters(t.Context(), obj)
		if ready || !errors.Is(err, clusteraccess.ErrMCPNotFound) {
			t.Fatalf("Clusters() = ready %v, %v; want not ready, ErrMCPNotFound", ready, err)
		}
		if _, ok := spruntime.AsInvalidUserInput(err); !ok {
			t.Errorf("Clusters() error %v is not an InvalidUserInput", err)
		}
	})
}
