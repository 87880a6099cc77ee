package broker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/marketplane/marketplane/api/install"
	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/code"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// TestUnservedOffering checks the answers to a bind and an update of a
// code-based instance whose offering the catalog does not serve: 503 with
// Retry-After while the Offering exists and its provider is not Ready (on
// a loaded machine an operator failing over makes it so for seconds, and
// the README's quick start saw its bind refused for good with 400), and
// the refusal as before once the Offering is gone; and the same for a
// provision of that offering.
func TestUnservedOffering(t *testing.T) {
	scheme, err := install.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	const id, offering = "paused-1", "sp-paused"
	serviceID := catalog.OfferingServiceID(offering)
	record := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: code.Namespace(id),
		Labels: map[string]string{sf.LabelManagedBy: sf.ManagedByBroker, code.LabelCodeInstance: code.Namespace(id)},
		Annotations: map[string]string{sf.AnnotationInstanceID: id, code.AnnotationServiceID: serviceID, code.AnnotationPlanID: "plan-1", code.AnnotationOwnsControlPlane: "true",
			code.AnnotationObject: `{"apiVersion":"sample.services.openmcp.cloud/v1alpha1","kind":"Sample","namespace":"osb-paused-1","name":"paused-1"}`}}}
	o := &marketplacev1alpha1.Offering{ObjectMeta: metav1.ObjectMeta{Name: offering}, Spec: marketplacev1alpha1.OfferingSpec{Ready: false}}
	onboarding := fake.NewClientBuilder().WithScheme(scheme).WithObjects(record, o).Build()
	empty := osb.CatalogFn(catalog.Empty)
	c, err := code.New(empty, onboarding, fake.NewClientBuilder().WithScheme(scheme).Build(), "access")
	if err != nil {
		t.Fatal(err)
	}
	call := &osb.Call{Version: osb.Version2_14, AcceptsIncomplete: true}
	send := func(fn func() (int, any, error)) (int, *osb.Error) {
		status, _, err := fn()
		if err == nil {
			return status, nil
		}
		var e *osb.Error
		if !errors.As(err, &e) {
			t.Fatalf("not an OSB error: %v", err)
		}
		return e.Status, e
	}
	bind := func() (int, any, error) {
		return c.Bind(context.Background(), call, &osb.BindRequest{InstanceID: id, BindingID: "b-1", ServiceID: serviceID, PlanID: "plan-1"})
	}
	update := func() (int, any, error) {
		return c.Update(context.Background(), call, &osb.UpdateRequest{InstanceID: id, ServiceID: serviceID, Parameters: json.RawMessage(`{"version":"v2"}`)})
	}

	requests := map[string]struct {
		fn   func() (int, any, error)
		gone int
	}{
		"Bind":   {bind, http.StatusBadRequest},
		"Update": {update, http.StatusUnprocessableEntity},
	}
	for name, rq := range requests {
		status, e := send(rq.fn)
		if status != http.StatusServiceUnavailable || e.RetryAfter <= 0 || !strings.Contains(e.Description, offering) {
			t.Errorf("%s while the provider is not Ready: %d %+v, want 503 with Retry-After naming %s", name, status, e, offering)
		}
	}
	// A provision through the handler: the offering is no SF service
	// either, so without the check the SF backend answered 400.
	auth, err := osb.NewBasicAuth("u", "p")
	if err != nil {
		t.Fatal(err)
	}
	sfBackend, err := sf.New(empty, newFakeStore(true))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := NewHandler(empty, sfBackend, c, auth)
	if err != nil {
		t.Fatal(err)
	}
	provision := func() *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(context.Background(), http.MethodPut, "/v2/service_instances/paused-2?accepts_incomplete=true",
			strings.NewReader(`{"service_id":"`+serviceID+`","plan_id":"plan-1","organization_guid":"o","space_guid":"s"}`))
		r.SetBasicAuth("u", "p")
		r.Header.Set(osb.HeaderAPIVersion, "2.13")
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, r)
		return w
	}
	if w := provision(); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("provision while the provider is not Ready: %d %s, want 503 with Retry-After", w.Code, w.Body)
	}

	if err := onboarding.Delete(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if w := provision(); w.Code != http.StatusBadRequest {
		t.Errorf("provision once the Offering is gone: %d %s, want 400", w.Code, w.Body)
	}
	for name, rq := range requests {
		if status, e := send(rq.fn); status != rq.gone {
			t.Errorf("%s once the Offering is gone: %d %+v, want %d", name, status, e, rq.gone)
		}
	}
}
