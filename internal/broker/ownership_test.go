package broker_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// squatRuns makes the ids of TestForeignInstanceNamespace unique per run,
// so that -count=N does not meet the namespaces of an earlier run (no
// namespace controller deletes them here).
var squatRuns atomic.Int64

// TestForeignInstanceNamespace plays a tenant whose namespace the platform
// happened to call sf-<x>: the tenant cannot create namespaces, but can
// write SFServiceInstances, SFServiceBindings and Secrets in its own. It
// pre-creates, for the OSB ids a platform user will later send, an
// instance and a binding with those ids (which the provisioner provisions,
// so they look succeeded), and a bind response Secret of its choosing.
// None of the broker's answers may come from those objects: a provision
// of the id is 409 and creates nothing there (the tenant would read the
// OSB user's credentials from the bind Secrets), and fetch, update,
// last_operation, bind, unbind and deprovision treat the instance as
// missing and leave the tenant's objects alone. A second tenant namespace, empty, is refused the
// same way.
func TestForeignInstanceNamespace(t *testing.T) {
	b := setup(t)
	h := h{t: t, base: b.url}
	ctx := context.Background()
	c := env.onboarding.Client
	run := squatRuns.Add(1)
	id, bid := fmt.Sprintf("squatted-%d", run), fmt.Sprintf("squatted-binding-%d", run)
	emptyID := fmt.Sprintf("squatted-empty-%d", run)

	// The platform gave the tenant these namespaces; the tenant fills one.
	for _, name := range []string{sf.InstanceNamespace(id), sf.InstanceNamespace(emptyID)} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tenant": "b"}}}
		if err := c.Create(ctx, ns); err != nil {
			t.Fatalf("create the tenant's namespace %s: %v", name, err)
		}
	}
	key := sf.InstanceKey(id)
	req := provisionBody(planSmall, nil)
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: osbv1alpha1.SFServiceInstanceSpec{
			InstanceID: id, ServiceID: serviceOf(planSmall), PlanID: planSmall,
			OrganizationGUID: "org-1", SpaceGUID: "space-1",
			Context: &runtime.RawExtension{Raw: []byte(`{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"space-1"}`)},
		},
	}
	if err := c.Create(ctx, inst); err != nil {
		t.Fatalf("create the tenant's instance: %v", err)
	}
	bkey := sf.BindingKey(id, bid)
	bnd := &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: bkey.Namespace, Name: bkey.Name},
		Spec: osbv1alpha1.SFServiceBindingSpec{
			ID: bid, InstanceID: id, ServiceID: serviceOf(planSmall), PlanID: planSmall, AppGUID: "app-1",
			BindResource: &runtime.RawExtension{Raw: []byte(`{"app_guid":"app-1"}`)},
		},
	}
	if err := c.Create(ctx, bnd); err != nil {
		t.Fatalf("create the tenant's binding: %v", err)
	}
	// The provisioner provisions what the tenant wrote: both succeed, and
	// the binding's response Secret is in the tenant's namespace.
	waitState := func(obj client.Object, state func() osbv1alpha1.State) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return false, err
			}
			return state() == osbv1alpha1.StateSucceeded, nil
		})
		if err != nil {
			t.Fatalf("the tenant's %T %s did not succeed: %v", obj, obj.GetName(), err)
		}
	}
	waitState(inst, func() osbv1alpha1.State { return inst.Status.State })
	waitState(bnd, func() osbv1alpha1.State { return bnd.Status.State })
	before := map[string]string{"instance": inst.ResourceVersion, "binding": bnd.ResourceVersion}

	// Every endpoint, as a platform would call it for these ids; each
	// answer is checked, so that one wrong answer does not hide another.
	expect := func(r reply, status int, what string) reply {
		t.Helper()
		if r.status != status {
			t.Errorf("%s: got %s, want status %d", what, r, status)
		}
		return r
	}
	r := expect(h.provision(id, planSmall, nil, false), http.StatusConflict, "provision into the tenant's namespace")
	if d := r.str("description"); r.status == http.StatusConflict && !strings.Contains(d, key.Namespace) {
		t.Errorf("the 409's description %q does not name the namespace", d)
	}
	expect(h.do(call{method: http.MethodPut, path: instancePath(emptyID), body: req}), http.StatusConflict, "provision into the tenant's empty namespace")
	expect(h.do(call{method: http.MethodGet, path: instancePath(id)}), http.StatusNotFound, "fetch instance")
	expect(h.do(call{method: http.MethodPatch, path: instancePath(id), body: obj{"service_id": serviceOf(planSmall), "parameters": obj{"x": "y"}}}),
		http.StatusNotFound, "update")
	expect(h.do(call{method: http.MethodGet, path: instancePath(id) + "/last_operation"}), http.StatusNotFound, "instance last_operation")
	expect(h.bind(id, bid, planSmall, nil, false), http.StatusNotFound, "bind")
	expect(h.bind(id, bid+"-new", planSmall, nil, false), http.StatusNotFound, "bind with a new binding id")
	expect(h.do(call{method: http.MethodGet, path: bindingPath(id, bid)}), http.StatusNotFound, "fetch binding")
	expect(h.do(call{method: http.MethodGet, path: bindingPath(id, bid) + "/last_operation"}), http.StatusNotFound, "binding last_operation")
	expect(h.do(call{method: http.MethodDelete, path: bindingPath(id, bid), query: deleteQuery(planSmall, false)}), http.StatusGone, "unbind")
	expect(h.do(call{method: http.MethodDelete, path: instancePath(id), query: deleteQuery(planSmall, true)}), http.StatusGone, "deprovision")

	// Nothing of the tenant's changed, and nothing was added.
	if err := c.Get(ctx, client.ObjectKeyFromObject(inst), inst); err != nil {
		t.Fatalf("the tenant's instance: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(bnd), bnd); err != nil {
		t.Fatalf("the tenant's binding: %v", err)
	}
	after := map[string]string{"instance": inst.ResourceVersion, "binding": bnd.ResourceVersion}
	for what, rv := range before {
		if after[what] != rv {
			t.Errorf("the broker changed the tenant's %s (resourceVersion %s, now %s)", what, rv, after[what])
		}
	}
	for _, name := range []string{key.Namespace, sf.InstanceNamespace(emptyID)} {
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			t.Fatalf("the tenant's namespace %s: %v", name, err)
		}
		if ns.DeletionTimestamp != nil || ns.Labels[sf.LabelManagedBy] != "" || ns.Annotations[sf.AnnotationInstanceID] != "" {
			t.Errorf("the broker changed the tenant's namespace %s: labels %v, annotations %v, deleting %v", name, ns.Labels, ns.Annotations, ns.DeletionTimestamp != nil)
		}
		var instances osbv1alpha1.SFServiceInstanceList
		var bindings osbv1alpha1.SFServiceBindingList
		if err := c.List(ctx, &instances, client.InNamespace(name)); err != nil {
			t.Fatal(err)
		}
		if err := c.List(ctx, &bindings, client.InNamespace(name)); err != nil {
			t.Fatal(err)
		}
		want := 0
		if name == key.Namespace {
			want = 1
		}
		if len(instances.Items) != want || len(bindings.Items) != want {
			t.Errorf("namespace %s holds %d instances and %d bindings, want the tenant's %d of each", name, len(instances.Items), len(bindings.Items), want)
		}
	}
}
