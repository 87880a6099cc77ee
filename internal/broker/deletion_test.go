package broker

import (
	"context"
	"net/http"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// TestFastDeletionFailureKept deletes an instance and a binding whose
// provisioner reports the deletion failed at once, before the broker
// records state "delete" after its delete call: the failure must stay in
// the status, so that last_operation answers "failed". Overwritten, it
// would be polled as "in progress" for ever, since the provisioner does
// not react to status changes.
func TestFastDeletionFailureKept(t *testing.T) {
	store := newFakeStore(true)
	s := newFuzzServer(t, store)
	ctx := context.Background()
	const path = "/v2/service_instances/fast-fail"
	const bpath = path + "/service_bindings/fast-fail-b"
	if w := serve(s, http.MethodPut, path, "accepts_incomplete=true", "", []byte(`{"service_id":"svc-async","plan_id":"plan-async","organization_guid":"o","space_guid":"s"}`)); w.Code != http.StatusAccepted {
		t.Fatalf("provision: %d %s", w.Code, w.Body)
	}
	if w := serve(s, http.MethodPut, bpath, "accepts_incomplete=true", "", []byte(`{"service_id":"svc-async","plan_id":"plan-async"}`)); w.Code != http.StatusAccepted {
		t.Fatalf("bind: %d %s", w.Code, w.Body)
	}
	// The provisioner holds both objects with a finalizer of its own.
	for _, o := range []client.Object{&osbv1alpha1.SFServiceInstance{}, &osbv1alpha1.SFServiceBinding{}} {
		key := sf.InstanceKey("fast-fail")
		if _, ok := o.(*osbv1alpha1.SFServiceBinding); ok {
			key = sf.BindingKey("fast-fail", "fast-fail-b")
		}
		if err := store.Get(ctx, key, o, sf.Fresh); err != nil {
			t.Fatal(err)
		}
		o.SetFinalizers(append(o.GetFinalizers(), "provisioner"))
		if err := store.Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	store.onDelete = func(stored client.Object) {
		switch o := stored.(type) {
		case *osbv1alpha1.SFServiceInstance:
			o.Status.State, o.Status.Error, o.Status.InstanceUsable = osbv1alpha1.StateFailed, "cannot delete", "true"
			o.Status.ObservedGeneration = o.Generation
		case *osbv1alpha1.SFServiceBinding:
			o.Status.State, o.Status.Error = osbv1alpha1.StateFailed, "cannot unbind"
			o.Status.ObservedGeneration = o.Generation
		}
	}

	w := serve(s, http.MethodDelete, bpath, "service_id=svc-async&plan_id=plan-async&accepts_incomplete=true", "", nil)
	if w.Code != http.StatusAccepted {
		t.Fatalf("unbind: %d %s", w.Code, w.Body)
	}
	w = serve(s, http.MethodGet, bpath+"/last_operation", "operation=delete-2", "", nil)
	if w.Code != http.StatusOK || w.Body.String() != `{"state":"failed","description":"cannot unbind"}` {
		t.Errorf("last_operation of the unbind the provisioner failed at once: %d %s, want 200 failed", w.Code, w.Body)
	}

	// The instance's bindings are deleted with it; the failed one is
	// already being deleted and left as it is.
	w = serve(s, http.MethodDelete, path, "service_id=svc-async&plan_id=plan-async&accepts_incomplete=true", "", nil)
	if w.Code != http.StatusAccepted {
		t.Fatalf("deprovision: %d %s", w.Code, w.Body)
	}
	w = serve(s, http.MethodGet, path+"/last_operation", "operation=delete-2", "", nil)
	if w.Code != http.StatusOK || w.Body.String() != `{"state":"failed","description":"cannot delete","instance_usable":true}` {
		t.Errorf("last_operation of the deprovision the provisioner failed at once: %d %s, want 200 failed", w.Code, w.Body)
	}
}
