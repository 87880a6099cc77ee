package interoperator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/replicate"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// foreignUID is the UID another master's ProviderConfig, or another
// original, has in the objects this test puts on the sister.
const foreignUID = "00000000-0000-4000-8000-000000000001"

// TestReplicaIdentity attacks the replicator through a sister cluster
// shared by two masters (inter-operators of two onboarding clusters) and
// by tenants of the sister's own. Names are the same everywhere; only
// UIDs tell the objects apart. In each case this master's original fails
// with ReplicaConflict, the other's object is neither changed nor
// deleted, nothing of it reaches this master's tenant, and the original
// is still deleted cleanly:
//
//   - master 2's tenant orders team/db while master 1's team/db lives on
//     the sister: master 2 must not rewrite, read or delete it;
//   - the sister's own tenant has a namespace and an instance named like
//     master 1's tenant's;
//   - a binding replica of another original (or of another master) is at
//     the name of master 1's binding: its bind Secret must not be copied;
//   - another master copied an SFPlan of the same name, or of the same
//     id, into the sister's catalog namespace: it is not overwritten, and
//     master 1's instances are not rendered with it.
func TestReplicaIdentity(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	clusters, err := testenv.NewMany(map[string][]testenv.Option{
		"sister":       {testenv.WithCRDs()},
		"onboarding-2": nil,
	})
	must(t, err)
	t.Cleanup(func() {
		for _, c := range clusters {
			if err := c.Stop(); err != nil {
				t.Errorf("stop %s: %v", c.Name, err)
			}
		}
	})
	sister, onboarding2 := clusters["sister"], clusters["onboarding-2"]
	onSister := func(obj client.Object) {
		t.Helper()
		must(t, sister.Client.Create(ctx, obj))
	}
	replicateMode := func(c *resourcev1alpha1.SFCluster) { c.Spec.ProvisioningMode = resourcev1alpha1.ProvisioningReplicate }
	toSister := func(s *interoperatorv1alpha1.ProviderConfigSpec) { s.DefaultCluster = "sister" }

	// Master 1 provisions team/db (here: <e.ns>/db) on the sister.
	local := fmt.Sprintf("local-%d", envCounter.Add(1))
	e := newEnv(t, envOptions{noCluster: true, moreNamespaces: []string{local}, configSpec: toSister})
	e.registerCluster(t, "sister", sister.Kubeconfig, replicateMode)
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", replicatePlan)
	e.createInstance(t, "db", "svc", "plan", map[string]any{"owner": "master-1"})
	waitFor(t, "the SFServiceInstance CRD to be established on the sister", func() bool {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		return sister.Client.Get(ctx, client.ObjectKey{Name: "sfserviceinstances.osb.servicefabrik.io"}, crd) == nil && crdinstall.Established(crd)
	})
	// The replica comes after the catalog copies, whose namespace the
	// sister's inter-operator needs.
	waitFor(t, "the replica of db on the sister", func() bool {
		return sister.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "db"}, &osbv1alpha1.SFServiceInstance{}) == nil
	})
	startSister(t, sister, e.catalog, e.ns)
	e.waitInstance(t, "db", osbv1alpha1.StateSucceeded)
	pc := &interoperatorv1alpha1.ProviderConfig{}
	must(t, platform.Client.Get(ctx, client.ObjectKey{Name: e.name}, pc))
	replicaKey := client.ObjectKey{Namespace: e.ns, Name: "db"}
	before := &osbv1alpha1.SFServiceInstance{}
	must(t, sister.Client.Get(ctx, replicaKey, before))
	if before.Labels[replicate.LabelMaster] != string(pc.UID) || before.Labels[replicate.LabelOriginal] != string(e.instance(t, "db").UID) {
		t.Errorf("the replica's labels %v do not name master 1 (%s) and the original", before.Labels, pc.UID)
	}
	ns := &corev1.Namespace{}
	must(t, sister.Client.Get(ctx, client.ObjectKey{Name: e.ns}, ns))
	if ns.Labels[replicate.LabelMaster] != string(pc.UID) {
		t.Errorf("the replicas' namespace has labels %v, want master 1's", ns.Labels)
	}

	// What the others have on the sister before master 1's tenants and
	// master 2 act. The sister's own tenant: a namespace and an instance
	// named like master 1's tenant's.
	onSister(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: local}})
	localDB := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: local, Name: "db", Labels: map[string]string{"owner": "sister-tenant"}},
		Spec: osbv1alpha1.SFServiceInstanceSpec{ServiceID: "svc", PlanID: "plan", ClusterID: replicate.SisterClusterID,
			Parameters: rawJSON(t, map[string]any{"owner": "sister-tenant"})},
	}
	onSister(localDB)
	// A binding replica of another original at the name of master 1's
	// binding, bound by the sister: its credentials are not master 1's.
	otherBinding := &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "b", Labels: map[string]string{
			replicate.LabelReplica: "true", replicate.LabelMaster: foreignUID, replicate.LabelOriginal: foreignUID}},
		Spec: osbv1alpha1.SFServiceBindingSpec{ID: "b", InstanceID: "db", PlanID: "plan", ServiceID: "svc"},
	}
	onSister(otherBinding)
	waitFor(t, "the sister to bind the other binding", func() bool {
		b := &osbv1alpha1.SFServiceBinding{}
		return sister.Client.Get(ctx, client.ObjectKeyFromObject(otherBinding), b) == nil && b.Status.State == osbv1alpha1.StateSucceeded
	})
	// Another master's copies in the sister's catalog namespace: one named
	// like master 1's plan-x, one with plan-y's id under another name.
	foreignPlan := func(name, id string) *osbv1alpha1.SFPlan {
		return &osbv1alpha1.SFPlan{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: name, Labels: map[string]string{replicate.LabelMaster: foreignUID}},
			Spec: osbv1alpha1.SFPlanSpec{ID: id, Name: name, ServiceID: "svc", Description: "another master's", Free: true, Bindable: true,
				Templates: []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("foreign"))}},
		}
	}
	planX, planY := foreignPlan("plan-x", "plan-x"), foreignPlan("other-master-y", "plan-y")
	onSister(planX)
	onSister(planY)
	// Master 1's plans of that name and id come after them: the catalog
	// mirror would otherwise have copied them first.
	e.createPlan(t, "plan-x", "svc", replicatePlan)
	e.createPlan(t, "plan-y", "svc", replicatePlan)

	// Master 2, an inter-operator of another onboarding cluster, whose
	// tenant has the namespace and instance name of master 1's.
	must(t, onboarding2.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}))
	e2 := newEnv(t, envOptions{noCluster: true, onboarding: onboarding2, namespace: e.ns, configSpec: toSister})
	e2.registerCluster(t, "sister", sister.Kubeconfig, replicateMode)
	e2.createService(t, "svc")
	e2.createPlan(t, "plan", "svc", replicatePlan)

	e2.createInstance(t, "db", "svc", "plan", map[string]any{"owner": "master-2"})
	e.tenant(local).createInstance(t, "db", "svc", "plan", map[string]any{"owner": "master-1-tenant-b"})
	e.createBinding(t, "b", e.instance(t, "db"))
	e.createInstance(t, "x", "svc", "plan-x", nil)
	e.createInstance(t, "y", "svc", "plan-y", nil)

	// Each original fails with ReplicaConflict, unless the attack worked
	// (checked below), and says what it conflicts with.
	conflicted := func(what string, conditions func() []metav1.Condition, state func() osbv1alpha1.State, attacked func() bool, message string) {
		t.Helper()
		waitFor(t, what+" to fail with "+replicate.ReasonReplicaConflict+" (or take over the other's object)", func() bool {
			r := readyCondition(conditions())
			return attacked() || (state() == osbv1alpha1.StateFailed && r != nil && r.Reason == replicate.ReasonReplicaConflict)
		})
		if r := readyCondition(conditions()); attacked() || r == nil || !strings.Contains(r.Message, message) {
			t.Errorf("%s: state %q, Ready %+v; want failed with a message saying %q, without touching the other's object", what, state(), r, message)
		}
	}
	replicaChanged := func() bool {
		now := &osbv1alpha1.SFServiceInstance{}
		err := sister.Client.Get(ctx, replicaKey, now)
		if apierrors.IsNotFound(err) {
			return true
		}
		must(t, err)
		return now.UID != before.UID || now.Generation != before.Generation || now.DeletionTimestamp != nil ||
			!apiequality.Semantic.DeepEqual(now.Spec, before.Spec) || now.Labels[replicate.LabelMaster] != string(pc.UID)
	}
	conflicted("master 2's db", func() []metav1.Condition { return e2.instance(t, "db").Status.Conditions },
		func() osbv1alpha1.State { return e2.instance(t, "db").Status.State }, replicaChanged,
		fmt.Sprintf("the namespace %s on SFCluster sister was not created by this inter-operator", e.ns))
	localChanged := func() bool {
		now := &osbv1alpha1.SFServiceInstance{}
		err := sister.Client.Get(ctx, client.ObjectKeyFromObject(localDB), now)
		if apierrors.IsNotFound(err) {
			return true
		}
		must(t, err)
		return now.Generation != localDB.Generation || now.Labels[replicate.LabelReplica] != "" || now.DeletionTimestamp != nil
	}
	conflicted("master 1's "+local+"/db", func() []metav1.Condition { return e.tenant(local).instance(t, "db").Status.Conditions },
		func() osbv1alpha1.State { return e.tenant(local).instance(t, "db").Status.State }, localChanged,
		fmt.Sprintf("the namespace %s on SFCluster sister was not created by this inter-operator", local))
	credentialsCopied := func() bool {
		err := onboarding.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "sf-b"}, &corev1.Secret{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	conflicted("master 1's binding b", func() []metav1.Condition { return e.binding(t, "b").Status.Conditions },
		func() osbv1alpha1.State { return e.binding(t, "b").Status.State }, credentialsCopied,
		fmt.Sprintf("SFServiceBinding %s/b exists on SFCluster sister and is not this binding's replica", e.ns))
	planChanged := func(p *osbv1alpha1.SFPlan) func() bool {
		return func() bool {
			now := &osbv1alpha1.SFPlan{}
			must(t, sister.Client.Get(ctx, client.ObjectKeyFromObject(p), now))
			return now.Generation != p.Generation || now.Labels[replicate.LabelMaster] != foreignUID
		}
	}
	conflicted("master 1's x", func() []metav1.Condition { return e.instance(t, "x").Status.Conditions },
		func() osbv1alpha1.State { return e.instance(t, "x").Status.State }, planChanged(planX),
		fmt.Sprintf("SFPlan plan-x in namespace %s on SFCluster sister was copied there by another master", e.catalog))
	// The sister's inter-operator takes the oldest plan of an id: a copy
	// of plan-y beside the other master's would have y rendered with the
	// other master's templates.
	planYCopied := func() bool {
		err := sister.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: "plan-y"}, &osbv1alpha1.SFPlan{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	conflicted("master 1's y", func() []metav1.Condition { return e.instance(t, "y").Status.Conditions },
		func() osbv1alpha1.State { return e.instance(t, "y").Status.State }, planYCopied,
		`has the id "plan-y" of SFPlan plan-y`)
	if e.instance(t, "db").Status.State != osbv1alpha1.StateSucceeded {
		t.Errorf("master 1's db: %s; want it untouched", describeInstance(e.instance(t, "db")))
	}

	// The failed originals go without deleting the others' objects.
	deleteAndWait(t, onboarding2.Client, e2.instance(t, "db"))
	deleteAndWait(t, onboarding.Client, e.tenant(local).instance(t, "db"))
	deleteAndWait(t, onboarding.Client, e.binding(t, "b"))
	if replicaChanged() {
		t.Errorf("master 1's replica changed or went when master 2 deprovisioned its db")
	}
	if localChanged() {
		t.Errorf("the sister's own instance changed or went when master 1's tenant deprovisioned its db")
	}
	b := &osbv1alpha1.SFServiceBinding{}
	must(t, sister.Client.Get(ctx, client.ObjectKeyFromObject(otherBinding), b))
	if b.DeletionTimestamp != nil || b.Labels[replicate.LabelOriginal] != foreignUID {
		t.Errorf("the other binding replica was deleted or relabelled: %+v", b.ObjectMeta)
	}
	for _, name := range []string{e.ns, local} {
		ns := &corev1.Namespace{}
		must(t, sister.Client.Get(ctx, client.ObjectKey{Name: name}, ns))
		if ns.DeletionTimestamp != nil {
			t.Errorf("the sister's namespace %s is being deleted", name)
		}
	}
	if e.instance(t, "db").Status.State != osbv1alpha1.StateSucceeded {
		t.Errorf("master 1's db: %s; want it untouched", describeInstance(e.instance(t, "db")))
	}
}
