package broker

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// TestLastOperationBehindCache checks last_operation against a cache that
// has not seen the broker's latest write: the operation the broker just
// handed out must be reported (in progress), never as unknown (400) and
// never with the previous operation's outcome.
func TestLastOperationBehindCache(t *testing.T) {
	store := newFakeStore(false)
	s := newFuzzServer(t, newFakeStore(true))
	s.store.Store = store
	const path = "/v2/service_instances/lagging"
	w := serve(s, http.MethodPut, path, "accepts_incomplete=true", "", []byte(`{"service_id":"svc-async","plan_id":"plan-async","organization_guid":"o","space_guid":"s"}`))
	if w.Code != http.StatusAccepted {
		t.Fatalf("provision: %d %s", w.Code, w.Body)
	}
	// The provisioner adds its finalizer and finishes; the cache sees it.
	inst := &osbv1alpha1.SFServiceInstance{}
	if err := store.Get(context.Background(), sf.InstanceKey("lagging"), inst, sf.Fresh); err != nil {
		t.Fatal(err)
	}
	inst.Finalizers = append(inst.Finalizers, "provisioner")
	if err := store.Update(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	inst.Status.State, inst.Status.ObservedGeneration = osbv1alpha1.StateSucceeded, inst.Generation
	if err := store.UpdateStatus(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	store.prev = map[string]client.Object{}

	store.lag = true
	w = serve(s, http.MethodPatch, path, "accepts_incomplete=true", "", []byte(`{"service_id":"svc-async","parameters":{"a":1}}`))
	if w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), `"operation":"update-2"`) {
		t.Fatalf("update: %d %s", w.Code, w.Body)
	}
	w = serve(s, http.MethodGet, path+"/last_operation", "operation=update-2", "", nil)
	if w.Code != http.StatusOK || w.Body.String() != `{"state":"in progress"}` {
		t.Errorf("last_operation of the new update behind the cache: %d %s, want 200 in progress", w.Code, w.Body)
	}
	w = serve(s, http.MethodDelete, path, "service_id=svc-async&plan_id=plan-async&accepts_incomplete=true", "", nil)
	if w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), `"operation":"delete-3"`) {
		t.Fatalf("deprovision: %d %s", w.Code, w.Body)
	}
	w = serve(s, http.MethodGet, path+"/last_operation", "operation=delete-3", "", nil)
	if w.Code != http.StatusOK || w.Body.String() != `{"state":"in progress"}` {
		t.Errorf("last_operation of the deletion behind the cache: %d %s, want 200 in progress", w.Code, w.Body)
	}
}
