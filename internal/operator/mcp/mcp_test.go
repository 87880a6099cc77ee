package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/internal/operator/mcp"
)

// TestManagedControlPlane runs the controller against real platform and
// onboarding API servers; the subtests share them and run in order.
func TestManagedControlPlane(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ensureNamespace(t, e.onboarding.Client, "tenant-a")

	t.Run("gets a cluster and access", e.testClusterAndAccess)
	t.Run("deletion deletes service objects first", e.testDeletion)
	t.Run("deletion deletes only kinds the provider owns", e.testDeletionOwnership)
	t.Run("bad input is a condition without a hot loop", e.testBadInput)
}

// testClusterAndAccess: an MCP gets its platform namespace, ClusterRequest
// and AccessRequest; once they are granted, the kubeconfig is copied to the
// onboarding cluster and published, and kept in sync; a removed token loses
// its AccessRequest and Secret.
func (e *env) testClusterAndAccess(t *testing.T) {
	ctx := context.Background()
	ci := corev2alpha1.TokenConfig{
		Name: "ci",
		TokenConfig: clustersv1alpha1.TokenConfig{
			Permissions: []clustersv1alpha1.PermissionsRequest{{
				Namespace: "ci",
				Rules:     []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list"}}},
			}},
			RoleRefs: []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "view"}},
		},
	}
	m := &corev2alpha1.ManagedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: "team-blue", Namespace: "tenant-a"},
		Spec:       corev2alpha1.ManagedControlPlaneSpec{IAM: corev2alpha1.IAMConfig{Tokens: []corev2alpha1.TokenConfig{ci}}},
	}
	create(t, e.onboarding.Client, m)
	platformNS := corev2alpha1.StableMCPNamespace(m.Namespace, m.Name)
	wantLabels := map[string]string{corev2alpha1.MCPNameLabel: m.Name, corev2alpha1.MCPNamespaceLabel: m.Namespace}

	// The namespace, ClusterRequest and AccessRequest on the platform cluster.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}}
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: platformNS}}
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: m.Name + ".ci", Namespace: platformNS}}
	eventually(t, "platform objects created", func(ctx context.Context) error {
		for _, o := range []client.Object{ns, cr, ar} {
			if err := e.platform.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
		}
		return nil
	})
	for _, o := range []client.Object{ns, cr} {
		got := map[string]string{}
		for k := range wantLabels {
			if v, ok := o.GetLabels()[k]; ok {
				got[k] = v
			}
		}
		if diff := cmp.Diff(wantLabels, got); diff != "" {
			t.Errorf("MCP labels of %T %s (-want +got):\n%s", o, o.GetName(), diff)
		}
	}
	if cr.Spec.Purpose != clustersv1alpha1.PurposeMCP {
		t.Errorf("ClusterRequest purpose = %q, want %q", cr.Spec.Purpose, clustersv1alpha1.PurposeMCP)
	}
	if ar.Labels[corev2alpha1.MCPNameLabel] != m.Name || ar.Labels[corev2alpha1.MCPNamespaceLabel] != m.Namespace || ar.Labels[mcp.TokenNameLabel] != "ci" {
		t.Errorf("AccessRequest labels = %v, want the MCP labels and %s=ci", ar.Labels, mcp.TokenNameLabel)
	}
	wantSpec := clustersv1alpha1.AccessRequestSpec{
		RequestRef: &common.ObjectReference{Name: cr.Name, Namespace: platformNS},
		Token:      &ci.TokenConfig,
	}
	if diff := cmp.Diff(wantSpec, ar.Spec); diff != "" {
		t.Errorf("AccessRequest spec (-want +got):\n%s", diff)
	}

	// Nothing is granted yet.
	eventually(t, "MCP pending", func(ctx context.Context) error {
		return mcpConditions(ctx, e, m, map[string]string{
			corev2alpha1.ConditionClusterRequestReady:      "False/" + string(mcp.ReasonClusterRequestPending),
			corev2alpha1.ConditionPrefixAccessReady + "ci": "False/" + string(mcp.ReasonAccessRequestPending),
			common.ConditionTypeReady:                      "False/" + string(mcp.ReasonClusterRequestPending),
		})
	})
	if !slices.Contains(m.Finalizers, corev2alpha1.MCPFinalizer) {
		t.Errorf("finalizers = %v, want %s", m.Finalizers, corev2alpha1.MCPFinalizer)
	}
	if m.Status.Phase != common.StatusPhaseProgressing {
		t.Errorf("phase = %q, want %q", m.Status.Phase, common.StatusPhaseProgressing)
	}

	// Grant both; the kubeconfig arrives on the onboarding cluster.
	cl := e.newCluster(t, "mcp-blue")
	e.grantClusterRequest(t, client.ObjectKeyFromObject(cr), cl)
	src := e.grantAccessRequest(t, client.ObjectKeyFromObject(ar), "kubeconfig-v1")
	eventually(t, "MCP ready", func(ctx context.Context) error {
		return mcpConditions(ctx, e, m, map[string]string{
			corev2alpha1.ConditionClusterRequestReady:      "True/" + string(mcp.ReasonClusterRequestGranted),
			corev2alpha1.ConditionPrefixAccessReady + "ci": "True/" + string(mcp.ReasonAccessReady),
			corev2alpha1.ConditionAllAccessReady:           "True/" + string(mcp.ReasonAllAccessReady),
			corev2alpha1.ConditionPrefixCluster + "Ready":  "True/Reachable",
			common.ConditionTypeReady:                      "True/" + string(mcp.ReasonReady),
		})
	})
	if m.Status.Phase != common.StatusPhaseReady {
		t.Errorf("phase = %q, want %q", m.Status.Phase, common.StatusPhaseReady)
	}
	if m.Status.ObservedGeneration != m.Generation {
		t.Errorf("observedGeneration = %d, want %d", m.Status.ObservedGeneration, m.Generation)
	}
	if diff := cmp.Diff(cl.Status.Endpoints, m.Status.Endpoints); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	secretName := m.Name + ".ci.kubeconfig"
	if diff := cmp.Diff(map[string]common.LocalObjectReference{"ci": {Name: secretName}}, m.Status.Access); diff != "" {
		t.Errorf("status.access (-want +got):\n%s", diff)
	}
	copied := &corev1.Secret{}
	get(t, e.onboarding.Client, client.ObjectKey{Namespace: m.Namespace, Name: secretName}, copied)
	if got := string(copied.Data[clustersv1alpha1.SecretKeyKubeconfig]); got != "kubeconfig-v1" {
		t.Errorf("copied kubeconfig = %q, want %q", got, "kubeconfig-v1")
	}
	if !metav1.IsControlledBy(copied, m) {
		t.Errorf("copied Secret owner references = %v, want the MCP as controller", copied.OwnerReferences)
	}
	if copied.Labels[corev2alpha1.MCPNameLabel] != m.Name || copied.Labels[mcp.TokenNameLabel] != "ci" {
		t.Errorf("copied Secret labels = %v", copied.Labels)
	}
	e.expectEvent(t, m, string(mcp.ReasonReady))

	// A refreshed token is copied again.
	mutate(t, e.platform.Client, src, false, func(s *corev1.Secret) {
		s.Data[clustersv1alpha1.SecretKeyKubeconfig] = []byte("kubeconfig-v2")
	})
	eventually(t, "refreshed kubeconfig copied", func(ctx context.Context) error {
		if err := e.onboarding.Client.Get(ctx, client.ObjectKeyFromObject(copied), copied); err != nil {
			return err
		}
		if got := string(copied.Data[clustersv1alpha1.SecretKeyKubeconfig]); got != "kubeconfig-v2" {
			return fmt.Errorf("kubeconfig = %q", got)
		}
		return nil
	})

	// A copy deleted by someone comes back.
	if err := e.onboarding.Client.Delete(ctx, copied); err != nil {
		t.Fatalf("delete copied Secret: %v", err)
	}
	eventually(t, "deleted copy restored", func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := e.onboarding.Client.Get(ctx, client.ObjectKeyFromObject(copied), s); err != nil {
			return err
		}
		if s.UID == copied.UID {
			return errors.New("still the old Secret")
		}
		return nil
	})

	// Replacing the token: the old AccessRequest is deleted (the test plays
	// its controller and lets it go), its Secret and status entry removed.
	mon := corev2alpha1.TokenConfig{Name: "monitoring", TokenConfig: clustersv1alpha1.TokenConfig{
		RoleRefs: []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "view"}},
	}}
	mutate(t, e.onboarding.Client, m, false, func(m *corev2alpha1.ManagedControlPlane) {
		m.Spec.IAM.Tokens = []corev2alpha1.TokenConfig{mon}
	})
	eventually(t, "old AccessRequest deleted", func(ctx context.Context) error { return deleting(ctx, e.platform.Client, ar) })
	removeFinalizer(t, e.platform.Client, ar, fakeAccessRequestFinalizer)
	eventually(t, "old access removed", func(ctx context.Context) error {
		if err := gone(ctx, e.onboarding.Client, &corev1.Secret{ObjectMeta: copied.ObjectMeta}); err != nil {
			return err
		}
		if err := gone(ctx, e.platform.Client, ar); err != nil {
			return err
		}
		if err := mcpConditions(ctx, e, m, map[string]string{
			corev2alpha1.ConditionPrefixAccessReady + "monitoring": "False/" + string(mcp.ReasonAccessRequestPending),
			common.ConditionTypeReady:                              "False/" + string(mcp.ReasonAccessNotReady),
		}); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(m.Status.Conditions, corev2alpha1.ConditionPrefixAccessReady+"ci"); c != nil {
			return fmt.Errorf("condition %s still there", c.Type)
		}
		if len(m.Status.Access) != 0 {
			return fmt.Errorf("status.access = %v, want empty", m.Status.Access)
		}
		if m.Status.ObservedGeneration != m.Generation {
			return fmt.Errorf("observedGeneration = %d, want %d", m.Status.ObservedGeneration, m.Generation)
		}
		return nil
	})
	newAR := &clustersv1alpha1.AccessRequest{}
	get(t, e.platform.Client, client.ObjectKey{Namespace: platformNS, Name: m.Name + ".monitoring"}, newAR)
	if diff := cmp.Diff(&mon.TokenConfig, newAR.Spec.Token); diff != "" {
		t.Errorf("new AccessRequest token (-want +got):\n%s", diff)
	}
}

// testDeletion: deleting an MCP deletes its service objects on the
// onboarding cluster first and waits for them; only then are its
// AccessRequests and then its ClusterRequest deleted and waited for; then
// the MCP goes. A registered kind that the onboarding cluster does not serve
// does not block the deletion.
func (e *env) testDeletion(t *testing.T) {
	ctx := context.Background()
	installFooCRD(t, e.onboarding.Client)
	fooGVK := metav1.GroupVersionKind{Group: fooGroup, Version: "v1alpha1", Kind: "Foo"}
	e.serviceProvider(t, "foo", nil,
		fooGVK,
		// Registered, but its CRD is not installed on the onboarding cluster.
		metav1.GroupVersionKind{Group: "bar.services.openmcp.cloud", Version: "v1alpha1", Kind: "Bar"})

	m := &corev2alpha1.ManagedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "tenant-a"},
		Spec: corev2alpha1.ManagedControlPlaneSpec{IAM: corev2alpha1.IAMConfig{Tokens: []corev2alpha1.TokenConfig{{
			Name: "admin", TokenConfig: clustersv1alpha1.TokenConfig{RoleRefs: []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "admin"}}},
		}}}},
	}
	create(t, e.onboarding.Client, m)
	platformNS := corev2alpha1.StableMCPNamespace(m.Namespace, m.Name)
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: platformNS}}
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: m.Name + ".admin", Namespace: platformNS}}
	eventually(t, "requests created", func(ctx context.Context) error {
		if err := e.platform.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return err
		}
		return e.platform.Client.Get(ctx, client.ObjectKeyFromObject(ar), ar)
	})
	e.grantClusterRequest(t, client.ObjectKeyFromObject(cr), e.newCluster(t, "mcp-svc"))
	e.grantAccessRequest(t, client.ObjectKeyFromObject(ar), "kubeconfig-svc")
	copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.Name + ".admin.kubeconfig", Namespace: m.Namespace}}
	eventually(t, "MCP ready", func(ctx context.Context) error {
		if err := mcpConditions(ctx, e, m, map[string]string{common.ConditionTypeReady: "True/" + string(mcp.ReasonReady)}); err != nil {
			return err
		}
		return e.onboarding.Client.Get(ctx, client.ObjectKeyFromObject(copied), copied)
	})

	// The service object of the MCP lingers on its own finalizer; another
	// Foo must not be touched.
	newFoo := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind(fooGVK))
		u.SetNamespace(m.Namespace)
		u.SetName(name)
		return u
	}
	foo := newFoo(m.Name)
	foo.SetFinalizers([]string{"foo.services.openmcp.cloud/test"})
	create(t, e.onboarding.Client, foo)
	otherFoo := newFoo("not-" + m.Name)
	create(t, e.onboarding.Client, otherFoo)

	if err := e.onboarding.Client.Delete(ctx, m); err != nil {
		t.Fatalf("delete MCP: %v", err)
	}
	eventually(t, "service object deleted first", func(ctx context.Context) error {
		if err := deleting(ctx, e.onboarding.Client, foo); err != nil {
			return fmt.Errorf("Foo: %w", err)
		}
		return mcpConditions(ctx, e, m, map[string]string{
			corev2alpha1.ConditionAllServicesDeleted: "False/" + string(mcp.ReasonDeletingServices),
			common.ConditionTypeReady:                "False/" + string(mcp.ReasonTerminating),
		})
	})
	c := apimeta.FindStatusCondition(m.Status.Conditions, corev2alpha1.ConditionAllServicesDeleted)
	if want := "Foo." + fooGroup + " tenant-a/svc"; !strings.Contains(c.Message, want) {
		t.Errorf("AllServicesDeleted message = %q, want it to name %q", c.Message, want)
	}
	if strings.Contains(c.Message, "Bar") {
		t.Errorf("AllServicesDeleted message = %q names the kind that is not installed", c.Message)
	}
	if m.Status.Phase != common.StatusPhaseTerminating {
		t.Errorf("phase = %q, want %q", m.Status.Phase, common.StatusPhaseTerminating)
	}
	for _, o := range []client.Object{cr, ar} {
		get(t, e.platform.Client, client.ObjectKeyFromObject(o), o)
		if o.GetDeletionTimestamp() != nil {
			t.Errorf("%T %s is being deleted while a service object is left", o, o.GetName())
		}
	}
	get(t, e.onboarding.Client, client.ObjectKeyFromObject(otherFoo), otherFoo)
	if otherFoo.GetDeletionTimestamp() != nil {
		t.Errorf("Foo %s, not named like the MCP, is being deleted", otherFoo.GetName())
	}

	// The service object goes: the AccessRequest is deleted, and only when
	// it is gone the ClusterRequest.
	removeFinalizer(t, e.onboarding.Client, foo, "foo.services.openmcp.cloud/test")
	eventually(t, "AccessRequest deleted", func(ctx context.Context) error { return deleting(ctx, e.platform.Client, ar) })
	eventually(t, "waiting for the AccessRequest", func(ctx context.Context) error {
		return mcpConditions(ctx, e, m, map[string]string{
			corev2alpha1.ConditionAllServicesDeleted:        "True/" + string(mcp.ReasonAllServicesDeleted),
			corev2alpha1.ConditionAllClusterRequestsDeleted: "False/" + string(mcp.ReasonDeletingClusterRequests),
		})
	})
	get(t, e.platform.Client, client.ObjectKeyFromObject(cr), cr)
	if cr.DeletionTimestamp != nil {
		t.Errorf("ClusterRequest deleted before its AccessRequest is gone")
	}
	removeFinalizer(t, e.platform.Client, ar, fakeAccessRequestFinalizer)
	eventually(t, "ClusterRequest deleted", func(ctx context.Context) error { return deleting(ctx, e.platform.Client, cr) })
	get(t, e.onboarding.Client, client.ObjectKeyFromObject(m), m)
	if c := apimeta.FindStatusCondition(m.Status.Conditions, corev2alpha1.ConditionAllClusterRequestsDeleted); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("AllClusterRequestsDeleted = %v while the ClusterRequest is still there", c)
	}
	removeFinalizer(t, e.platform.Client, cr, fakeClusterRequestFinalizer)

	eventually(t, "MCP gone", func(ctx context.Context) error { return gone(ctx, e.onboarding.Client, m) })
	if err := gone(ctx, e.onboarding.Client, copied); err != nil {
		t.Errorf("kubeconfig Secret: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}}
	if err := deleting(ctx, e.platform.Client, ns); err != nil && gone(ctx, e.platform.Client, ns) != nil {
		t.Errorf("platform namespace %s: %v", platformNS, err)
	}
}

// testDeletionOwnership is issue #10 item 2: a provider adds the core
// group's Secret and ConfigMap and another provider's kind to its own
// status.resources, then MCP v1 in tenant-v is deleted. The objects named
// v1 in tenant-v of those kinds must survive: the MCP deletes only the
// kinds of groups the provider owns.
func (e *env) testDeletionOwnership(t *testing.T) {
	ctx := context.Background()
	ensureFooCRD(t, e.onboarding.Client)
	ensureNamespace(t, e.onboarding.Client, "tenant-v")
	// The platform operator gives Foo's group to another provider.
	e.serviceProvider(t, "foo-owner", []string{fooGroup})
	e.serviceProvider(t, "evil", nil,
		metav1.GroupVersionKind{Group: "", Version: "v1", Kind: "Secret"},
		metav1.GroupVersionKind{Group: "", Version: "v1", Kind: "ConfigMap"},
		metav1.GroupVersionKind{Group: fooGroup, Version: "v1alpha1", Kind: "Foo"})

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "v1", Namespace: "tenant-v"}, StringData: map[string]string{"k": "v"}}
	configMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "v1", Namespace: "tenant-v"}}
	foo := &unstructured.Unstructured{}
	foo.SetGroupVersionKind(schema.GroupVersionKind{Group: fooGroup, Version: "v1alpha1", Kind: "Foo"})
	foo.SetNamespace("tenant-v")
	foo.SetName("v1")
	for _, o := range []client.Object{secret, configMap, foo} {
		create(t, e.onboarding.Client, o)
	}

	m := &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "v1", Namespace: "tenant-v"}}
	create(t, e.onboarding.Client, m)
	eventually(t, "MCP has its finalizer", func(ctx context.Context) error {
		if err := e.onboarding.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if !controllerutil.ContainsFinalizer(m, corev2alpha1.MCPFinalizer) {
			return errors.New("no finalizer yet")
		}
		return nil
	})
	if err := e.onboarding.Client.Delete(ctx, m); err != nil {
		t.Fatalf("delete MCP: %v", err)
	}
	eventually(t, "MCP gone", func(ctx context.Context) error { return gone(ctx, e.onboarding.Client, m) })

	for kind, o := range map[string]client.Object{"Secret": secret, "ConfigMap": configMap, "Foo": foo} {
		err := e.onboarding.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
		switch {
		case err != nil:
			t.Errorf("%s %s after the MCP's deletion: %v; a kind registered by a provider that does not own its group must not be deleted",
				kind, client.ObjectKeyFromObject(o), err)
		case o.GetDeletionTimestamp() != nil:
			t.Errorf("%s %s is being deleted; a kind registered by a provider that does not own its group must not be deleted", kind, client.ObjectKeyFromObject(o))
		}
	}
}

// testBadInput: a denied ClusterRequest, OIDC access and an overlong name
// each give a condition with a reason, and the controller then stays quiet.
func (e *env) testBadInput(t *testing.T) {
	m := &corev2alpha1.ManagedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: "denied", Namespace: "tenant-a",
			Labels: map[string]string{corev2alpha1.MCPPurposeOverrideLabel: "mcp-large"}},
		Spec: corev2alpha1.ManagedControlPlaneSpec{IAM: corev2alpha1.IAMConfig{
			OIDC: &corev2alpha1.OIDCConfig{ExtraProviders: []common.OIDCProviderConfig{{
				Name: "sso", Issuer: "https://sso.example", ClientID: "mcp",
				RoleBindings: []common.RoleBindings{{
					Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "devs"}},
					RoleRefs: []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "edit"}},
				}},
			}}},
		}},
	}
	create(t, e.onboarding.Client, m)
	long := &corev2alpha1.ManagedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("x", mcp.MaxNameLength+1), Namespace: "tenant-a"},
	}
	create(t, e.onboarding.Client, long)

	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: corev2alpha1.StableMCPNamespace(m.Namespace, m.Name)}}
	eventually(t, "ClusterRequest created", func(ctx context.Context) error {
		return e.platform.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr)
	})
	if cr.Spec.Purpose != "mcp-large" {
		t.Errorf("purpose = %q, want the override %q", cr.Spec.Purpose, "mcp-large")
	}
	mutate(t, e.platform.Client, cr, true, func(cr *clustersv1alpha1.ClusterRequest) {
		cr.Status.Phase = clustersv1alpha1.RequestDenied
		cr.Status.Conditions = []metav1.Condition{{
			Type: common.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "NoMatchingCluster",
			Message: "no cluster serves purpose mcp-large", LastTransitionTime: metav1.Now(),
		}}
	})
	eventually(t, "denial reported", func(ctx context.Context) error {
		if err := mcpConditions(ctx, e, long, map[string]string{common.ConditionTypeReady: "False/" + string(mcp.ReasonInvalidName)}); err != nil {
			return err
		}
		return mcpConditions(ctx, e, m, map[string]string{
			corev2alpha1.ConditionClusterRequestReady:       "False/NoMatchingCluster",
			corev2alpha1.ConditionPrefixAccessReady + "sso": "False/" + string(mcp.ReasonOIDCNotSupported),
			corev2alpha1.ConditionAllAccessReady:            "False/" + string(mcp.ReasonAccessNotReady),
			common.ConditionTypeReady:                       "False/" + string(mcp.ReasonClusterRequestDenied),
		})
	})
	if c := apimeta.FindStatusCondition(m.Status.Conditions, common.ConditionTypeReady); !strings.Contains(c.Message, "no cluster serves purpose mcp-large") {
		t.Errorf("Ready message = %q, want the ClusterRequest's message", c.Message)
	}
	e.expectEvent(t, m, string(mcp.ReasonClusterRequestDenied))

	// No hot loop: with nothing changing, the controller stays (almost) idle.
	// A hot loop (an error's backoff or a short requeue) would reconcile
	// ten times or more in the window.
	before := e.reconciles(t)
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, 3*time.Second, false, func(context.Context) (bool, error) {
		if n := e.reconciles(t) - before; n > 3 {
			return false, fmt.Errorf("%v reconciles with nothing changing, want at most 3", n)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Errorf("no hot loop: %v", err)
	}
	t.Logf("%v reconciles in the 3s window", e.reconciles(t)-before)
	ns := &corev1.Namespace{}
	if err := e.platform.Client.Get(context.Background(), client.ObjectKey{Name: corev2alpha1.StableMCPNamespace(long.Namespace, long.Name)}, ns); err == nil {
		t.Errorf("a platform namespace was created for the MCP with the invalid name")
	}

	// The invalid MCP can be deleted all the same.
	if err := e.onboarding.Client.Delete(context.Background(), long); err != nil {
		t.Fatalf("delete MCP: %v", err)
	}
	eventually(t, "invalid MCP gone", func(ctx context.Context) error { return gone(ctx, e.onboarding.Client, long) })
}

// mcpConditions gets m and returns nil when its conditions have the wanted
// "Status/Reason" per type.
func mcpConditions(ctx context.Context, e *env, m *corev2alpha1.ManagedControlPlane, want map[string]string) error {
	if err := e.onboarding.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		return err
	}
	got := map[string]string{}
	for typ := range want {
		if c := apimeta.FindStatusCondition(m.Status.Conditions, typ); c != nil {
			got[typ] = string(c.Status) + "/" + c.Reason
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("conditions (-want +got):\n%s", diff)
	}
	return nil
}

// expectEvent waits for an event about m with the given reason.
func (e *env) expectEvent(t *testing.T, m *corev2alpha1.ManagedControlPlane, reason string) {
	t.Helper()
	eventually(t, "event "+reason, func(ctx context.Context) error {
		list := &eventsv1.EventList{}
		if err := e.onboarding.Client.List(ctx, list, client.InNamespace(m.Namespace)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.UID == m.UID && ev.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no event with reason %s among %d", reason, len(list.Items))
	})
}
