package interoperator_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
)

// deregistrationEnv starts an inter-operator whose instances live in its
// own namespace and in a second tenant's, with a service svc and the
// plans named, and a second inter-operator (another master: ProviderConfig
// and catalog namespace of its own) with entries of the same names and
// ids and one instance, provisioned, of the first plan. It waits until the
// first inter-operator holds its finalizer on every entry.
func deregistrationEnv(t *testing.T, plans ...string) (e, other *env, tenant string) {
	t.Helper()
	tenant = uniqueName("tenant-b-")
	e = newEnv(t, envOptions{moreNamespaces: []string{tenant}})
	other = newEnv(t, envOptions{})
	tmpl := []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("data"))}
	for _, x := range []*env{e, other} {
		x.createService(t, "svc")
		for _, p := range plans {
			x.createPlan(t, p, "svc", tmpl)
		}
	}
	other.createInstance(t, "theirs", "svc", plans[0], nil)
	other.waitInstance(t, "theirs", osbv1alpha1.StateSucceeded)
	waitHeld(t, other, &osbv1alpha1.SFService{ObjectMeta: metav1.ObjectMeta{Namespace: other.catalog, Name: "svc"}})
	waitHeld(t, other, &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: other.catalog, Name: plans[0]}})
	return e, other, tenant
}

// notHeld checks that the catalog entry obj does not carry the finalizer
// of e's inter-operator: nobody uses it.
func notHeld(t *testing.T, e *env, obj client.Object) {
	t.Helper()
	must(t, platform.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	if fin := catalog.Finalizer(e.name, ""); slices.Contains(obj.GetFinalizers(), fin) {
		t.Errorf("%s, used by no instance, carries the finalizer %s: an inter-operator uninstalled now would leave it stuck", obj.GetName(), fin)
	}
}

// waitHeld waits until the catalog entry obj carries the finalizer of e's
// inter-operator.
func waitHeld(t *testing.T, e *env, obj client.Object) {
	t.Helper()
	fin := catalog.Finalizer(e.name, "")
	waitFor(t, "the finalizer "+fin+" on "+obj.GetName(), func() bool {
		if err := platform.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false
		}
		return slices.Contains(obj.GetFinalizers(), fin)
	})
}

// waitBlocked waits until the catalog entry obj is being deleted and
// reports DeletionBlocked with a message that names every instance of
// want, and no instance of unwanted.
func waitBlocked(t *testing.T, obj client.Object, conditions func() []metav1.Condition, count string, want, unwanted []string) {
	t.Helper()
	var last string
	err := pollUntil(func() bool {
		if err := platform.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			last = err.Error()
			return false
		}
		c := readyCondition(conditions())
		if c == nil {
			last = "no Ready condition"
			return false
		}
		last = c.Reason + ": " + c.Message
		if obj.GetDeletionTimestamp() == nil || c.Status != metav1.ConditionFalse || c.Reason != string(catalog.ReasonDeletionBlocked) ||
			c.ObservedGeneration != obj.GetGeneration() || !strings.Contains(c.Message, count) {
			return false
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return false
			}
		}
		for _, u := range unwanted {
			if strings.Contains(c.Message, u) {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("%s: want a blocked deletion naming %s (%v, not %v); last seen: %s", obj.GetName(), count, want, unwanted, last)
	}
}

// pollUntil polls cond with the package's interval and timeout.
func pollUntil(cond func() bool) error {
	return wait.PollUntilContextTimeout(context.Background(), pollEvery, pollTimeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
}

// TestPlanDeletionWaitsForInstances deletes an SFPlan with two instances
// (in two tenants' namespaces): it stays, Ready=False DeletionBlocked
// naming both, while its instances work on; deleting one updates the
// message, deleting the last lets it go. A plan without instances goes at
// once. The instance of another master's plan of the same name and id
// neither holds this plan nor loses its own plan the finalizer.
func TestPlanDeletionWaitsForInstances(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e, other, tenant := deregistrationEnv(t, "plan", "spare")
	ctx := context.Background()
	b := e.tenant(tenant)
	plan := &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "plan"}}
	spare := &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "spare"}}
	// Validated, and held by nobody: no instance uses them yet.
	waitFor(t, "the plan validated", func() bool {
		must(t, platform.Client.Get(ctx, client.ObjectKeyFromObject(plan), plan))
		return readyCondition(plan.Status.Conditions) != nil
	})
	notHeld(t, e, plan)
	e.createInstance(t, "a", "svc", "plan", nil)
	b.createInstance(t, "b", "svc", "plan", nil)
	e.waitInstance(t, "a", osbv1alpha1.StateSucceeded)
	b.waitInstance(t, "b", osbv1alpha1.StateSucceeded)
	waitHeld(t, e, plan)
	waitHeld(t, e, &osbv1alpha1.SFService{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "svc"}})
	notHeld(t, e, spare)

	// A plan nobody uses goes at once.
	deleteAndWait(t, platform.Client, spare)

	must(t, platform.Client.Delete(ctx, plan))
	conds := func() []metav1.Condition { return plan.Status.Conditions }
	theirs := other.ns + "/theirs"
	waitBlocked(t, plan, conds, "2 instances of the plan", []string{e.ns + "/a", tenant + "/b"}, []string{theirs})

	// The instances are served on: an update of a is applied with the
	// plan being deleted.
	inst := e.instance(t, "a")
	edit(t, onboarding.Client, inst, func() { inst.Spec.Parameters = rawJSON(t, map[string]any{"size": 2}) })
	waitFor(t, "the update of a with its plan being deleted", func() bool {
		i := e.instance(t, "a")
		return i.Status.State == osbv1alpha1.StateSucceeded && i.Status.ObservedGeneration == i.Generation
	})

	deleteAndWait(t, onboarding.Client, e.instance(t, "a"))
	waitBlocked(t, plan, conds, "1 instance of the plan", []string{tenant + "/b"}, []string{e.ns + "/a", theirs})
	deleteAndWait(t, onboarding.Client, b.instance(t, "b"))
	waitGone(t, platform.Client, plan)
	// With its last instance gone, the service is held no more.
	svc := &osbv1alpha1.SFService{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "svc"}}
	waitFor(t, "svc to lose the finalizer with its last instance", func() bool {
		must(t, platform.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc))
		return !slices.Contains(svc.Finalizers, catalog.Finalizer(e.name, ""))
	})

	// The other master's plan of the same name and id kept its finalizer.
	otherPlan := &osbv1alpha1.SFPlan{}
	must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: other.catalog, Name: "plan"}, otherPlan))
	if !slices.Contains(otherPlan.Finalizers, catalog.Finalizer(other.name, "")) || otherPlan.DeletionTimestamp != nil {
		t.Errorf("the other master's plan: finalizers %v, deletion %v; want its finalizer and no deletion", otherPlan.Finalizers, otherPlan.DeletionTimestamp)
	}
}

// TestServiceDeletionWaitsForInstances deletes an SFService whose two
// plans have one instance each: it stays, DeletionBlocked naming both,
// until the last is gone. Another master's instance of the same ids does
// not count.
func TestServiceDeletionWaitsForInstances(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e, other, tenant := deregistrationEnv(t, "p1", "p2")
	ctx := context.Background()
	b := e.tenant(tenant)
	e.createInstance(t, "inst-x", "svc", "p1", nil)
	b.createInstance(t, "inst-y", "svc", "p2", nil)
	e.waitInstance(t, "inst-x", osbv1alpha1.StateSucceeded)
	b.waitInstance(t, "inst-y", osbv1alpha1.StateSucceeded)

	svc := &osbv1alpha1.SFService{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "svc"}}
	waitHeld(t, e, svc)
	must(t, platform.Client.Delete(ctx, svc))
	conds := func() []metav1.Condition { return svc.Status.Conditions }
	theirs := other.ns + "/theirs"
	waitBlocked(t, svc, conds, "2 instances of the service", []string{e.ns + "/inst-x", tenant + "/inst-y"}, []string{theirs})

	deleteAndWait(t, onboarding.Client, b.instance(t, "inst-y"))
	waitBlocked(t, svc, conds, "1 instance of the service", []string{e.ns + "/inst-x"}, []string{tenant + "/inst-y", theirs})
	deleteAndWait(t, onboarding.Client, e.instance(t, "inst-x"))
	waitGone(t, platform.Client, svc)

	otherSvc := &osbv1alpha1.SFService{}
	must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: other.catalog, Name: "svc"}, otherSvc))
	if !slices.Contains(otherSvc.Finalizers, catalog.Finalizer(other.name, "")) || otherSvc.DeletionTimestamp != nil {
		t.Errorf("the other master's service: finalizers %v, deletion %v; want its finalizer and no deletion", otherSvc.Finalizers, otherSvc.DeletionTimestamp)
	}
}

// TestCatalogReleasedWithProviderConfig deletes a plan that an instance
// uses, then the inter-operator's ProviderConfig: the inter-operator is
// torn down, and its catalog is released, the plan gone although the
// instance is still there.
func TestCatalogReleasedWithProviderConfig(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.createService(t, "svc")
	plan := e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("data"))})
	e.createInstance(t, "kept", "svc", "plan", nil)
	e.waitInstance(t, "kept", osbv1alpha1.StateSucceeded)
	waitHeld(t, e, plan)

	must(t, platform.Client.Delete(ctx, plan))
	waitBlocked(t, plan, func() []metav1.Condition { return plan.Status.Conditions }, "1 instance of the plan", []string{e.ns + "/kept"}, nil)

	must(t, platform.Client.Delete(ctx, &interoperatorv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: e.name}}))
	waitGone(t, platform.Client, plan)
	svc := &osbv1alpha1.SFService{}
	waitFor(t, "the service to lose the finalizer", func() bool {
		err := platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "svc"}, svc)
		return apierrors.IsNotFound(err) || (err == nil && !slices.Contains(svc.Finalizers, catalog.Finalizer(e.name, "")))
	})
	if e.instance(t, "kept") == nil {
		t.Errorf("the instance is gone; only the catalog should have been released")
	}
}
