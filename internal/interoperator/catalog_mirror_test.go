package interoperator_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/replicate"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestCatalogMirror plays Service Fabrik's Service Replicator: a sister
// SFCluster in mode replicate gets the master's whole catalog before any
// instance exists, follows its changes (also those made while the sister
// did not answer), loses a removed plan unless an instance on the sister
// uses it, leaves another master's and the sister's own entries of the
// same names alone (the SFCluster's CatalogReplicated condition says so),
// and loses this master's copies when it leaves mode replicate or is
// deleted.
func TestCatalogMirror(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	crds, err := interoperator.CRDs()
	must(t, err)
	sister := testenv.Start(t, testenv.WithName("sister"), testenv.WithCRDs(crds...))

	e := newEnv(t, envOptions{noCluster: true})
	pc := &interoperatorv1alpha1.ProviderConfig{}
	must(t, platform.Client.Get(ctx, client.ObjectKey{Name: e.name}, pc))

	// The sister already holds, in its catalog namespace, another
	// master's plan "taken" and a plan "own" of its own.
	must(t, sister.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.catalog}}))
	others := map[string]*osbv1alpha1.SFPlan{
		"taken": {ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "taken", Labels: map[string]string{replicate.LabelMaster: foreignUID}},
			Spec: osbv1alpha1.SFPlanSpec{ID: "other-taken", Name: "taken", ServiceID: "other", Description: "another master's", Templates: replicatePlan}},
		"own": {ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "own"},
			Spec: osbv1alpha1.SFPlanSpec{ID: "sister-own", Name: "own", ServiceID: "other", Description: "the sister's own", Templates: replicatePlan}},
	}
	for _, p := range others {
		must(t, sister.Client.Create(ctx, p))
	}

	// The master's catalog: two services, four plans, no instance.
	e.createService(t, "svc-a")
	e.createService(t, "svc-b")
	e.createPlan(t, "a1", "svc-a", replicatePlan)
	e.createPlan(t, "a2", "svc-a", replicatePlan, func(p *osbv1alpha1.SFPlan) {
		p.Spec.Templates = append(p.Spec.Templates, gotemplate(osbv1alpha1.ActionClusterSelector, "tier=gold"))
	})
	e.createPlan(t, "b1", "svc-b", replicatePlan)
	e.createPlan(t, "taken", "svc-b", replicatePlan)
	e.createPlan(t, "own", "svc-b", replicatePlan)
	e.registerCluster(t, "sister", sister.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Spec.ProvisioningMode = resourcev1alpha1.ProvisioningReplicate
	})

	copied := func(kind client.Object, name string) client.Object {
		t.Helper()
		obj := kind.DeepCopyObject().(client.Object)
		err := sister.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		must(t, err)
		if obj.GetLabels()[replicate.LabelMaster] != string(pc.UID) || obj.GetDeletionTimestamp() != nil {
			return nil
		}
		return obj
	}
	type copyOf struct {
		kind client.Object
		name string
	}
	mine := []copyOf{{&osbv1alpha1.SFService{}, "svc-a"}, {&osbv1alpha1.SFService{}, "svc-b"}, {&osbv1alpha1.SFPlan{}, "a1"}, {&osbv1alpha1.SFPlan{}, "a2"}, {&osbv1alpha1.SFPlan{}, "b1"}}
	allCopied := func() bool {
		for _, c := range mine {
			if copied(c.kind, c.name) == nil {
				return false
			}
		}
		return true
	}
	waitFor(t, "the master's services and plans, unused by any instance, on the sister", allCopied)
	a2 := copied(&osbv1alpha1.SFPlan{}, "a2").(*osbv1alpha1.SFPlan)
	if len(a2.Spec.Templates) != len(replicatePlan) {
		t.Errorf("the copy of a2 has %d templates, want the %d without its clusterSelector", len(a2.Spec.Templates), len(replicatePlan))
	}
	if list := e.instances(t); len(list) != 0 {
		t.Fatalf("instances %v on the onboarding cluster; the catalog must come without any", list)
	}
	condition := func(reason string, contains ...string) func() bool {
		return func() bool {
			c := catalogCondition(t, e, "sister")
			if c == nil || c.Reason != reason {
				return false
			}
			for _, s := range contains {
				if !strings.Contains(c.Message, s) {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "CatalogReplicated=False/ReplicaConflict naming taken and own", condition(replicate.ReasonReplicaConflict, "SFPlan own ", "SFPlan taken "))
	othersUntouched := func() {
		t.Helper()
		for name, p := range others {
			now := &osbv1alpha1.SFPlan{}
			must(t, sister.Client.Get(ctx, client.ObjectKeyFromObject(p), now))
			if now.Generation != 1 || now.Spec.ID != p.Spec.ID || now.Labels[replicate.LabelMaster] != p.Labels[replicate.LabelMaster] || now.DeletionTimestamp != nil {
				t.Errorf("the sister's %s plan was touched: id %q, generation %d, labels %v, deleting %v", name, now.Spec.ID, now.Generation, now.Labels, now.DeletionTimestamp != nil)
			}
		}
	}
	othersUntouched()

	// A plan change on the master reaches the sister, without an
	// instance of it.
	changePlan(t, e, "a1", "gold", "version 2")
	waitFor(t, "the change of a1 on the sister", func() bool {
		p, ok := copied(&osbv1alpha1.SFPlan{}, "a1").(*osbv1alpha1.SFPlan)
		return ok && p.Spec.Description == "version 2" && p.Labels["tier"] == "gold"
	})

	// A plan removed from the master goes from the sister; the
	// conflicting ones removed, the condition is True.
	for _, name := range []string{"a2", "taken", "own"} {
		deleteAndWait(t, platform.Client, &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: name}})
	}
	waitGone(t, sister.Client, &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "a2"}})
	mine = slices.DeleteFunc(mine, func(c copyOf) bool { return c.name == "a2" })
	waitFor(t, "CatalogReplicated=True", condition(replicate.ReasonCatalogReplicated))
	othersUntouched()

	// A plan that a replica uses is kept by the master's catalog (its
	// deletion waits for the instance), and so stays on the sister.
	e.createInstance(t, "inst", "svc-b", "b1", nil, func(i *osbv1alpha1.SFServiceInstance) { i.Spec.ClusterID = "sister" })
	waitFor(t, "the replica on the sister", func() bool {
		return sister.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "inst"}, &osbv1alpha1.SFServiceInstance{}) == nil
	})
	b1 := &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "b1"}}
	must(t, platform.Client.Delete(ctx, b1))
	waitFor(t, "the master's b1 kept while its instance lives (Ready=False/DeletionBlocked)", func() bool {
		p := &osbv1alpha1.SFPlan{}
		if err := platform.Client.Get(ctx, client.ObjectKeyFromObject(b1), p); err != nil {
			return false
		}
		r := apimeta.FindStatusCondition(p.Status.Conditions, "Ready")
		return p.DeletionTimestamp != nil && r != nil && r.Reason == string(catalog.ReasonDeletionBlocked)
	})
	if copied(&osbv1alpha1.SFPlan{}, "b1") == nil {
		t.Fatalf("the copy of b1 went while the replica uses it")
	}
	// An instance of the sister's own tenants keeps the copy after the
	// master's entry went (CopyInUse), until that instance is gone.
	must(t, sister.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sister-tenant"}}))
	local := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sister-tenant", Name: "local"},
		Spec: osbv1alpha1.SFServiceInstanceSpec{InstanceID: "local", ServiceID: "svc-b", PlanID: "b1",
			OrganizationGUID: "org", SpaceGUID: "space"},
	}
	must(t, sister.Client.Create(ctx, local))
	deleteAndWait(t, onboarding.Client, e.instance(t, "inst"))
	waitGone(t, platform.Client, b1)
	waitFor(t, "CatalogReplicated=False/CopyInUse naming b1", condition(replicate.ReasonCopyInUse, "SFPlan b1 (1 instances)"))
	if copied(&osbv1alpha1.SFPlan{}, "b1") == nil {
		t.Fatalf("the copy of b1 went while an instance on the sister uses it")
	}
	deleteAndWait(t, sister.Client, local)
	waitGone(t, sister.Client, &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "b1"}})
	waitFor(t, "CatalogReplicated=True once b1 is gone", condition(replicate.ReasonCatalogReplicated))
	e.createPlan(t, "b1", "svc-b", replicatePlan)

	// The sister stops answering: the condition says so; a change made
	// meanwhile reaches it when it answers again.
	// The Secret is not watched: changes of the plan bring the mirror
	// back until the registry has read the broken kubeconfig.
	e.setKubeconfig(t, "sister", deadKubeconfig(t, sister))
	unreachable := condition(replicate.ReasonClusterUnreachable, "SFCluster sister is unreachable")
	outage := 0
	waitFor(t, "CatalogReplicated=False/ClusterUnreachable", func() bool {
		if unreachable() {
			return true
		}
		outage++
		changePlan(t, e, "a1", "silver", fmt.Sprintf("outage %d", outage))
		return false
	})
	changePlan(t, e, "a1", "silver", "version 3")
	e.setKubeconfig(t, "sister", sister.Kubeconfig)
	waitFor(t, "the change made during the outage on the sister", func() bool {
		p, ok := copied(&osbv1alpha1.SFPlan{}, "a1").(*osbv1alpha1.SFPlan)
		return ok && p.Spec.Description == "version 3" && copied(&osbv1alpha1.SFPlan{}, "b1") != nil
	})
	waitFor(t, "CatalogReplicated=True after the outage", condition(replicate.ReasonCatalogReplicated))

	// Leaving mode replicate removes the copies and the condition; back
	// in it, the catalog comes back.
	setMode := func(mode resourcev1alpha1.ProvisioningMode) {
		t.Helper()
		sfc := &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "sister"}}
		patch := fmt.Appendf(nil, `{"spec":{"provisioningMode":%q}}`, mode)
		must(t, platform.Client.Patch(ctx, sfc, client.RawPatch(types.MergePatchType, patch)))
	}
	noCopies := func() bool {
		for _, c := range mine {
			if copied(c.kind, c.name) != nil {
				return false
			}
		}
		return true
	}
	setMode(resourcev1alpha1.ProvisioningCentral)
	waitFor(t, "the copies to go when the SFCluster leaves mode replicate", noCopies)
	waitFor(t, "the condition and the finalizer to go", func() bool {
		sfc := &resourcev1alpha1.SFCluster{}
		must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "sister"}, sfc))
		return catalogCondition(t, e, "sister") == nil && !controllerutil.ContainsFinalizer(sfc, replicate.FinalizerCatalogCopies)
	})
	setMode(resourcev1alpha1.ProvisioningReplicate)
	waitFor(t, "the catalog back on the sister", allCopied)

	// Deleting the SFCluster removes the copies, not the others'.
	deleteAndWait(t, platform.Client, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "sister"}})
	if !noCopies() {
		t.Errorf("copies of this master are left on the sister after its SFCluster was deleted")
	}
	othersUntouched()
}

// catalogCondition returns the CatalogReplicated condition of the env's
// SFCluster name, or nil.
func catalogCondition(t *testing.T, e *env, name string) *metav1.Condition {
	t.Helper()
	sfc := &resourcev1alpha1.SFCluster{}
	must(t, platform.Client.Get(context.Background(), client.ObjectKey{Namespace: e.catalog, Name: name}, sfc))
	return apimeta.FindStatusCondition(sfc.Status.Conditions, replicate.ConditionCatalogReplicated)
}

// changePlan sets the description and the label tier of the plan name
// (a merge patch: the catalog controller writes the plan's status).
func changePlan(t *testing.T, e *env, name, tier, description string) {
	t.Helper()
	p := &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: name}}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"tier":%q}},"spec":{"description":%q}}`, tier, description)
	must(t, platform.Client.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, patch)))
}

// instances returns the names of the env's instances.
func (e *env) instances(t *testing.T) []string {
	t.Helper()
	list := &osbv1alpha1.SFServiceInstanceList{}
	must(t, e.onboarding().Client.List(context.Background(), list, client.InNamespace(e.ns)))
	var names []string
	for _, i := range list.Items {
		names = append(names, i.Name)
	}
	return names
}

// deadKubeconfig returns c's kubeconfig pointing to a port nobody listens
// on any more.
func deadKubeconfig(t *testing.T, c *testenv.Cluster) []byte {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	dead := l.Addr().String()
	must(t, l.Close())
	u, err := url.Parse(c.Config.Host)
	must(t, err)
	return []byte(strings.ReplaceAll(string(c.Kubeconfig), u.Host, dead))
}
