package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	controlplanev2alpha1 "github.com/marketplane/marketplane/api/controlplane/v2alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/internal/operator/mcp"
)

// controlPlane is a control plane of either kind, as the tests see it.
type controlPlane interface {
	client.Object
	ControlPlaneStatus() *corev2alpha1.ManagedControlPlaneStatus
}

// TestControlPlaneKinds runs the controller against real platform and
// onboarding API servers for what issue #11 added: openMCP's ControlPlane
// kind, openMCP's platform namespace with the migration of control planes
// of earlier versions, the name conflict between the two kinds and openMCP's
// purpose label.
func TestControlPlaneKinds(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ensureNamespace(t, e.onboarding.Client, "tenant-a")
	ensureNamespace(t, e.onboarding.Client, "default")

	t.Run("a ControlPlane gets a cluster and access in openMCP's namespace", e.testControlPlane)
	t.Run("a control plane of an earlier version keeps its namespace, cluster and access", e.testLegacyMigration)
	t.Run("a ControlPlane and a ManagedControlPlane of one name do not share a cluster", e.testNameConflict)
	t.Run("openMCP's purpose label is accepted", e.testPurposeLabels)
	t.Run("an edited platform-namespace annotation cannot point elsewhere", e.testAnnotationGuard)
}

// cpConditions gets m and returns nil when its conditions have the wanted
// "Status/Reason" per type.
func cpConditions(ctx context.Context, e *env, m controlPlane, want map[string]string) error {
	if err := e.onboarding.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		return err
	}
	got := map[string]string{}
	for typ := range want {
		if c := apimeta.FindStatusCondition(m.ControlPlaneStatus().Conditions, typ); c != nil {
			got[typ] = string(c.Status) + "/" + c.Reason
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("conditions of %T %s (-want +got):\n%s", m, client.ObjectKeyFromObject(m), diff)
	}
	return nil
}

// waitFor gets obj until it exists.
func (e *env) waitFor(t *testing.T, c client.Client, what string, obj client.Object) {
	t.Helper()
	eventually(t, what, func(ctx context.Context) error { return c.Get(ctx, client.ObjectKeyFromObject(obj), obj) })
}

// mustNotExist fails the test when obj exists.
func mustNotExist(t *testing.T, c client.Client, obj client.Object, why string) {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err == nil {
		t.Errorf("%T %s exists: %s", obj, client.ObjectKeyFromObject(obj), why)
	} else if !apierrors.IsNotFound(err) {
		t.Errorf("get %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

func adminToken() []corev2alpha1.TokenConfig {
	return []corev2alpha1.TokenConfig{{
		Name: "admin", TokenConfig: clustersv1alpha1.TokenConfig{RoleRefs: []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "admin"}}},
	}}
}

// testControlPlane: openMCP's test vector MCP, as a ControlPlane in
// namespace default named test-controlplane, gets its requests in
// mcp--be2cbc6e-13da-83b4-90ea-c21fccf8022c (where openMCP's clusteraccess
// library looks), a kind label on that namespace, the annotation that
// records it, and a kubeconfig Secret owned by the ControlPlane.
func (e *env) testControlPlane(t *testing.T) {
	cp := &controlplanev2alpha1.ControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: "test-controlplane", Namespace: "default"},
		Spec:       corev2alpha1.ManagedControlPlaneSpec{IAM: corev2alpha1.IAMConfig{Tokens: adminToken()}},
	}
	create(t, e.onboarding.Client, cp)
	const platformNS = "mcp--be2cbc6e-13da-83b4-90ea-c21fccf8022c"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}}
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: cp.Name, Namespace: platformNS}}
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: cp.Name + ".admin", Namespace: platformNS}}
	e.waitFor(t, e.platform.Client, "ClusterRequest in openMCP's namespace", cr)
	e.waitFor(t, e.platform.Client, "AccessRequest in openMCP's namespace", ar)
	get(t, e.platform.Client, client.ObjectKeyFromObject(ns), ns)
	wantLabels := map[string]string{
		corev2alpha1.MCPNameLabel: cp.Name, corev2alpha1.MCPNamespaceLabel: cp.Namespace, corev2alpha1.MCPKindLabel: mcp.KindControlPlane,
	}
	for k, v := range wantLabels {
		if ns.Labels[k] != v {
			t.Errorf("platform namespace label %s = %q, want %q (labels %v)", k, ns.Labels[k], v, ns.Labels)
		}
	}

	e.grantClusterRequest(t, client.ObjectKeyFromObject(cr), e.newCluster(t, "mcp-cp"))
	e.grantAccessRequest(t, client.ObjectKeyFromObject(ar), "kubeconfig-cp")
	eventually(t, "ControlPlane ready", func(ctx context.Context) error {
		return cpConditions(ctx, e, cp, map[string]string{
			corev2alpha1.ConditionClusterRequestReady: "True/" + string(mcp.ReasonClusterRequestGranted),
			common.ConditionTypeReady:                 "True/" + string(mcp.ReasonReady),
		})
	})
	if got := cp.Annotations[corev2alpha1.PlatformNamespaceAnnotation]; got != platformNS {
		t.Errorf("annotation %s = %q, want %q", corev2alpha1.PlatformNamespaceAnnotation, got, platformNS)
	}
	if cp.Status.Phase != common.StatusPhaseReady || cp.Status.Access["admin"].Name != "test-controlplane.admin.kubeconfig" {
		t.Errorf("status phase %q, access %v; want Ready and the admin kubeconfig Secret", cp.Status.Phase, cp.Status.Access)
	}
	s := &corev1.Secret{}
	get(t, e.onboarding.Client, client.ObjectKey{Namespace: cp.Namespace, Name: "test-controlplane.admin.kubeconfig"}, s)
	if owner := metav1.GetControllerOf(s); owner == nil || owner.Kind != mcp.KindControlPlane || owner.APIVersion != controlplanev2alpha1.GroupVersion.String() || owner.UID != cp.UID {
		t.Errorf("kubeconfig Secret controller = %+v, want the ControlPlane", owner)
	}
	e.expectEventFor(t, cp, string(mcp.ReasonReady))

	// Deletion works for the new kind as for the old one.
	if err := e.onboarding.Client.Delete(context.Background(), cp); err != nil {
		t.Fatalf("delete ControlPlane: %v", err)
	}
	eventually(t, "AccessRequest deleted", func(ctx context.Context) error { return deleting(ctx, e.platform.Client, ar) })
	removeFinalizer(t, e.platform.Client, ar, fakeAccessRequestFinalizer)
	eventually(t, "ClusterRequest deleted", func(ctx context.Context) error { return deleting(ctx, e.platform.Client, cr) })
	removeFinalizer(t, e.platform.Client, cr, fakeClusterRequestFinalizer)
	eventually(t, "ControlPlane gone", func(ctx context.Context) error { return gone(ctx, e.onboarding.Client, cp) })
}

// testLegacyMigration plays an upgrade: the platform namespace, granted
// ClusterRequest and AccessRequest of a ManagedControlPlane exist where the
// earlier version put them (LegacyMCPNamespace, no kind label). The MCP
// stays with them: Ready, the same cluster and kubeconfig, nothing in
// openMCP's namespace. A ControlPlane of the same name then conflicts with
// it, and a new MCP gets openMCP's namespace.
func (e *env) testLegacyMigration(t *testing.T) {
	ctx := context.Background()
	const name = "old-timer"
	legacy := corev2alpha1.LegacyMCPNamespace("tenant-a", name)
	stable := corev2alpha1.StableMCPNamespace("tenant-a", name)
	labels := map[string]string{corev2alpha1.MCPNameLabel: name, corev2alpha1.MCPNamespaceLabel: "tenant-a"}
	create(t, e.platform.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: legacy, Labels: labels}})
	cr := &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: legacy, Labels: labels},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeMCP},
	}
	create(t, e.platform.Client, cr)
	cl := e.newCluster(t, "mcp-old")
	e.grantClusterRequest(t, client.ObjectKeyFromObject(cr), cl)
	arLabels := map[string]string{corev2alpha1.MCPNameLabel: name, corev2alpha1.MCPNamespaceLabel: "tenant-a", mcp.TokenNameLabel: "admin"}
	ar := &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name + ".admin", Namespace: legacy, Labels: arLabels},
		Spec: clustersv1alpha1.AccessRequestSpec{
			RequestRef: &common.ObjectReference{Name: name, Namespace: legacy},
			Token:      &adminToken()[0].TokenConfig,
		},
	}
	create(t, e.platform.Client, ar)
	e.grantAccessRequest(t, client.ObjectKeyFromObject(ar), "kubeconfig-of-the-old-cluster")
	get(t, e.platform.Client, client.ObjectKeyFromObject(cr), cr)
	get(t, e.platform.Client, client.ObjectKeyFromObject(ar), ar)
	crUID, arUID := cr.UID, ar.UID

	m := &corev2alpha1.ManagedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-a"},
		Spec:       corev2alpha1.ManagedControlPlaneSpec{IAM: corev2alpha1.IAMConfig{Tokens: adminToken()}},
	}
	create(t, e.onboarding.Client, m)
	eventually(t, "legacy MCP ready", func(ctx context.Context) error {
		return cpConditions(ctx, e, m, map[string]string{common.ConditionTypeReady: "True/" + string(mcp.ReasonReady)})
	})
	if got := m.Annotations[corev2alpha1.PlatformNamespaceAnnotation]; got != legacy {
		t.Errorf("annotation %s = %q, want the legacy namespace %q", corev2alpha1.PlatformNamespaceAnnotation, got, legacy)
	}
	if diff := cmp.Diff(cl.Status.Endpoints, m.Status.Endpoints); diff != "" {
		t.Errorf("endpoints are not those of the legacy cluster (-want +got):\n%s", diff)
	}
	s := &corev1.Secret{}
	get(t, e.onboarding.Client, client.ObjectKey{Namespace: m.Namespace, Name: name + ".admin.kubeconfig"}, s)
	if got := string(s.Data[clustersv1alpha1.SecretKeyKubeconfig]); got != "kubeconfig-of-the-old-cluster" {
		t.Errorf("kubeconfig = %q, want the legacy AccessRequest's", got)
	}
	get(t, e.platform.Client, client.ObjectKeyFromObject(cr), cr)
	get(t, e.platform.Client, client.ObjectKeyFromObject(ar), ar)
	if cr.UID != crUID || ar.UID != arUID || !cr.DeletionTimestamp.IsZero() || !ar.DeletionTimestamp.IsZero() {
		t.Errorf("the legacy requests were replaced or are being deleted")
	}
	ns := &corev1.Namespace{}
	get(t, e.platform.Client, client.ObjectKey{Name: legacy}, ns)
	if ns.Labels[corev2alpha1.MCPKindLabel] != mcp.KindManagedControlPlane {
		t.Errorf("legacy namespace labels %v, want %s=%s added", ns.Labels, corev2alpha1.MCPKindLabel, mcp.KindManagedControlPlane)
	}
	mustNotExist(t, e.platform.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stable}}, "a migrated MCP must not get openMCP's namespace as well")

	// A ControlPlane of the same name cannot take the name: the legacy MCP
	// holds it, although in the other namespace.
	cp := &controlplanev2alpha1.ControlPlane{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-a"}}
	create(t, e.onboarding.Client, cp)
	eventually(t, "ControlPlane conflicts with the legacy MCP", func(ctx context.Context) error {
		return cpConditions(ctx, e, cp, map[string]string{common.ConditionTypeReady: "False/" + string(mcp.ReasonNameConflict)})
	})
	mustNotExist(t, e.platform.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stable}}, "the conflicting ControlPlane must not get a namespace")
	if err := e.onboarding.Client.Delete(ctx, cp); err != nil {
		t.Fatalf("delete ControlPlane: %v", err)
	}
	eventually(t, "conflicting ControlPlane gone", func(ctx context.Context) error { return gone(ctx, e.onboarding.Client, cp) })
	get(t, e.platform.Client, client.ObjectKeyFromObject(cr), cr)
	if !cr.DeletionTimestamp.IsZero() {
		t.Errorf("deleting the conflicting ControlPlane deleted the legacy MCP's ClusterRequest")
	}

	// A new MCP gets openMCP's namespace.
	fresh := &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "tenant-a"}}
	create(t, e.onboarding.Client, fresh)
	freshCR := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: corev2alpha1.StableMCPNamespace("tenant-a", "fresh")}}
	e.waitFor(t, e.platform.Client, "new MCP's ClusterRequest in openMCP's namespace", freshCR)
	eventually(t, "new MCP's annotation", func(ctx context.Context) error {
		get(t, e.onboarding.Client, client.ObjectKeyFromObject(fresh), fresh)
		if got := fresh.Annotations[corev2alpha1.PlatformNamespaceAnnotation]; got != freshCR.Namespace {
			return fmt.Errorf("annotation = %q, want %q", got, freshCR.Namespace)
		}
		return nil
	})
	mustNotExist(t, e.platform.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev2alpha1.LegacyMCPNamespace("tenant-a", "fresh")}}, "a new MCP gets no legacy namespace")

	// The legacy MCP is deleted from its legacy namespace.
	if err := e.onboarding.Client.Delete(ctx, m); err != nil {
		t.Fatalf("delete MCP: %v", err)
	}
	eventually(t, "legacy AccessRequest deleted", func(ctx context.Context) error { return deleting(ctx, e.platform.Client, ar) })
	removeFinalizer(t, e.platform.Client, ar, fakeAccessRequestFinalizer)
	eventually(t, "legacy ClusterRequest deleted", func(ctx context.Context) error { return deleting(ctx, e.platform.Client, cr) })
	removeFinalizer(t, e.platform.Client, cr, fakeClusterRequestFinalizer)
	eventually(t, "legacy MCP gone", func(ctx context.Context) error { return gone(ctx, e.onboarding.Client, m) })
	eventually(t, "legacy namespace deleted", func(ctx context.Context) error {
		if err := e.platform.Client.Get(ctx, client.ObjectKey{Name: legacy}, ns); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if ns.DeletionTimestamp.IsZero() {
			return errors.New("legacy namespace not being deleted")
		}
		return nil
	})
}

// testNameConflict: a ManagedControlPlane and a ControlPlane of one
// namespace and name map to one platform namespace. The first keeps its
// cluster; the second is Ready=False with reason NameConflict, gets nothing,
// and its deletion deletes nothing of the first (not even the service
// objects named like both). The same holds the other way round.
func (e *env) testNameConflict(t *testing.T) {
	ctx := context.Background()
	ensureFooCRD(t, e.onboarding.Client)
	fooGVK := metav1.GroupVersionKind{Group: fooGroup, Version: "v1alpha1", Kind: "Foo"}
	e.serviceProvider(t, "foo-conflict", nil, fooGVK)

	for _, tc := range []struct {
		name          string
		first, second controlPlane
		firstKind     string
	}{
		{
			name:      "dup-a",
			first:     &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "dup-a", Namespace: "tenant-a"}},
			second:    &controlplanev2alpha1.ControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "dup-a", Namespace: "tenant-a"}},
			firstKind: mcp.KindManagedControlPlane,
		},
		{
			name:      "dup-b",
			first:     &controlplanev2alpha1.ControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "dup-b", Namespace: "tenant-a"}},
			second:    &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "dup-b", Namespace: "tenant-a"}},
			firstKind: mcp.KindControlPlane,
		},
	} {
		t.Run(tc.firstKind+" first", func(t *testing.T) {
			platformNS := corev2alpha1.StableMCPNamespace("tenant-a", tc.name)
			create(t, e.onboarding.Client, tc.first)
			cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: platformNS}}
			e.waitFor(t, e.platform.Client, "first one's ClusterRequest", cr)
			e.grantClusterRequest(t, client.ObjectKeyFromObject(cr), e.newCluster(t, "mcp-"+tc.name))
			eventually(t, "first one ready", func(ctx context.Context) error {
				return cpConditions(ctx, e, tc.first, map[string]string{common.ConditionTypeReady: "True/" + string(mcp.ReasonReady)})
			})
			get(t, e.platform.Client, client.ObjectKeyFromObject(cr), cr)
			crBefore := cr.DeepCopy()

			foo := &unstructured.Unstructured{}
			foo.SetGroupVersionKind(schema.GroupVersionKind(fooGVK))
			foo.SetNamespace("tenant-a")
			foo.SetName(tc.name)
			create(t, e.onboarding.Client, foo)

			create(t, e.onboarding.Client, tc.second)
			eventually(t, "second one reports the conflict", func(ctx context.Context) error {
				return cpConditions(ctx, e, tc.second, map[string]string{common.ConditionTypeReady: "False/" + string(mcp.ReasonNameConflict)})
			})
			c := apimeta.FindStatusCondition(tc.second.ControlPlaneStatus().Conditions, common.ConditionTypeReady)
			if want := "A " + tc.firstKind + " named tenant-a/" + tc.name + " already holds platform namespace " + platformNS; !strings.Contains(c.Message, want) {
				t.Errorf("NameConflict message = %q, want it to say %q", c.Message, want)
			}
			if _, ok := tc.second.GetAnnotations()[corev2alpha1.PlatformNamespaceAnnotation]; ok {
				t.Errorf("the second one got the platform-namespace annotation %v", tc.second.GetAnnotations())
			}
			e.expectEventFor(t, tc.second, string(mcp.ReasonNameConflict))
			if err := cpConditions(ctx, e, tc.first, map[string]string{common.ConditionTypeReady: "True/" + string(mcp.ReasonReady)}); err != nil {
				t.Errorf("the first one is no longer Ready: %v", err)
			}
			ns := &corev1.Namespace{}
			get(t, e.platform.Client, client.ObjectKey{Name: platformNS}, ns)
			if ns.Labels[corev2alpha1.MCPKindLabel] != tc.firstKind {
				t.Errorf("platform namespace kind label = %q, want the first one's %q", ns.Labels[corev2alpha1.MCPKindLabel], tc.firstKind)
			}

			// Deleting the second one touches nothing of the first.
			if err := e.onboarding.Client.Delete(ctx, tc.second); err != nil {
				t.Fatalf("delete the second one: %v", err)
			}
			eventually(t, "second one gone", func(ctx context.Context) error { return gone(ctx, e.onboarding.Client, tc.second) })
			get(t, e.platform.Client, client.ObjectKeyFromObject(cr), cr)
			if cr.UID != crBefore.UID || !cr.DeletionTimestamp.IsZero() || cr.Status.Cluster == nil {
				t.Errorf("the first one's ClusterRequest changed: deletionTimestamp %v, cluster %v", cr.DeletionTimestamp, cr.Status.Cluster)
			}
			get(t, e.onboarding.Client, client.ObjectKeyFromObject(foo), foo)
			if foo.GetDeletionTimestamp() != nil {
				t.Errorf("deleting the second one deleted the service object of the first")
			}
			get(t, e.platform.Client, client.ObjectKey{Name: platformNS}, ns)
			if !ns.DeletionTimestamp.IsZero() {
				t.Errorf("deleting the second one deleted the first one's platform namespace")
			}
			if err := cpConditions(ctx, e, tc.first, map[string]string{common.ConditionTypeReady: "True/" + string(mcp.ReasonReady)}); err != nil {
				t.Errorf("the first one is no longer Ready after the second's deletion: %v", err)
			}
		})
	}
}

// testPurposeLabels: openMCP's core.openmcp.cloud/purpose sets the purpose
// of the ClusterRequest like Marketplane's purpose-override (tested in
// testBadInput of TestManagedControlPlane); when both are set, the override
// wins.
func (e *env) testPurposeLabels(t *testing.T) {
	cases := map[string]struct {
		obj  controlPlane
		want string
	}{
		"ControlPlane with openMCP's label": {
			obj: &controlplanev2alpha1.ControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "purpose-cp", Namespace: "tenant-a",
				Labels: map[string]string{corev2alpha1.MCPPurposeLabel: "mcp-small"}}},
			want: "mcp-small",
		},
		"ManagedControlPlane with openMCP's label": {
			obj: &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "purpose-mcp", Namespace: "tenant-a",
				Labels: map[string]string{corev2alpha1.MCPPurposeLabel: "mcp-small"}}},
			want: "mcp-small",
		},
		"both labels": {
			obj: &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "purpose-both", Namespace: "tenant-a",
				Labels: map[string]string{corev2alpha1.MCPPurposeLabel: "mcp-small", corev2alpha1.MCPPurposeOverrideLabel: "mcp-large"}}},
			want: "mcp-large",
		},
		"no label": {
			obj:  &controlplanev2alpha1.ControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "purpose-none", Namespace: "tenant-a"}},
			want: clustersv1alpha1.PurposeMCP,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			create(t, e.onboarding.Client, tc.obj)
			cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{
				Name: tc.obj.GetName(), Namespace: corev2alpha1.StableMCPNamespace(tc.obj.GetNamespace(), tc.obj.GetName()),
			}}
			e.waitFor(t, e.platform.Client, "ClusterRequest", cr)
			if cr.Spec.Purpose != tc.want {
				t.Errorf("ClusterRequest purpose = %q, want %q (labels %v)", cr.Spec.Purpose, tc.want, tc.obj.GetLabels())
			}
		})
	}
}

// testAnnotationGuard: a tenant who sets the platform-namespace annotation
// to another MCP's namespace (or any namespace) does not move the
// controller's requests there; the controller puts its own value back.
func (e *env) testAnnotationGuard(t *testing.T) {
	victim := corev2alpha1.StableMCPNamespace("tenant-b", "victim")
	m := &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "intruder", Namespace: "tenant-a",
		Annotations: map[string]string{corev2alpha1.PlatformNamespaceAnnotation: victim}}}
	create(t, e.onboarding.Client, m)
	own := corev2alpha1.StableMCPNamespace(m.Namespace, m.Name)
	e.waitFor(t, e.platform.Client, "ClusterRequest in the MCP's own namespace",
		&clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: own}})
	eventually(t, "annotation corrected", func(ctx context.Context) error {
		get(t, e.onboarding.Client, client.ObjectKeyFromObject(m), m)
		if got := m.Annotations[corev2alpha1.PlatformNamespaceAnnotation]; got != own {
			return fmt.Errorf("annotation = %q, want %q", got, own)
		}
		return nil
	})
	mustNotExist(t, e.platform.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: victim}}, "the annotation must not make the controller create another MCP's namespace")
}

// expectEventFor waits for an event about m with the given reason.
func (e *env) expectEventFor(t *testing.T, m client.Object, reason string) {
	t.Helper()
	eventually(t, "event "+reason, func(ctx context.Context) error {
		list := &eventsv1.EventList{}
		if err := e.onboarding.Client.List(ctx, list, client.InNamespace(m.GetNamespace())); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.UID == m.GetUID() && ev.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no event with reason %s about %s among %d", reason, m.GetName(), len(list.Items))
	})
}
