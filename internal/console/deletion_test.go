package console_test

import (
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/console"
)

// TestDeleteNeedsConfirmation: a delete of an instance or a binding that
// did not pass the confirmation page (no confirm field naming it) deletes
// nothing and is sent to that page; the page says what goes and posts the
// confirmed delete, which works without JavaScript.
func TestDeleteNeedsConfirmation(t *testing.T) {
	e := setup(t)
	cs := startConsole(t, e, false, nil)
	u := signIn(t, cs, e.tokenA)
	ctx := t.Context()
	admin := e.cluster.Client
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "confirm-inst"},
		Spec: osbv1alpha1.SFServiceInstanceSpec{InstanceID: "confirm-inst", ServiceID: e.serviceID, PlanID: e.planID,
			Parameters: &runtime.RawExtension{Raw: []byte(`{}`)}},
	}
	bind := &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "confirm-bind"},
		Spec:       osbv1alpha1.SFServiceBindingSpec{ID: "confirm-bind", InstanceID: "confirm-inst", ServiceID: e.serviceID, PlanID: e.planID},
	}
	for _, o := range []client.Object{inst, bind} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
	instPath := "/ns/" + nsA + "/sf/confirm-inst"
	bindPath := "/ns/" + nsA + "/bindings/confirm-bind"
	for _, c := range []struct {
		name, path, title, back string
		obj                     client.Object
	}{
		// The binding first: its confirmed delete returns to its instance.
		{"binding", bindPath, "Delete binding confirm-bind?", instPath, bind},
		{"instance", instPath, "Delete confirm-inst?", "/instances?namespace=" + nsA, inst},
	} {
		key := client.ObjectKeyFromObject(c.obj)
		for _, form := range []map[string]string{{"csrf": u.csrf}, {"csrf": u.csrf, console.ConfirmField: "another-name"}} {
			resp := u.postForm(t, c.path+"/delete", form)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != c.path+"/delete" {
				t.Errorf("%s: unconfirmed delete (confirm %q): status %d to %q, want 303 to the confirmation page", c.name, form[console.ConfirmField], resp.StatusCode, resp.Header.Get("Location"))
			}
			if err := admin.Get(ctx, key, c.obj); err != nil || c.obj.GetDeletionTimestamp() != nil {
				t.Fatalf("%s after an unconfirmed delete: %v, deletion %v", c.name, err, c.obj.GetDeletionTimestamp())
			}
		}
		code, body := u.get(t, c.path+"/delete")
		if code != http.StatusOK || !strings.Contains(body, c.title) || !strings.Contains(body, `name="confirm" value="`+c.obj.GetName()+`"`) {
			t.Fatalf("%s: confirmation page: status %d, title %q there %v, confirm field there %v", c.name, code, c.title, strings.Contains(body, c.title), strings.Contains(body, `name="confirm"`))
		}
		if !strings.Contains(body, `href="`+instPath+`" id="cancel-delete"`) {
			t.Errorf("%s: the confirmation page's Cancel does not lead back to the instance page %s", c.name, instPath)
		}
		resp := u.postForm(t, c.path+"/delete", map[string]string{"csrf": u.csrf, console.ConfirmField: c.obj.GetName()})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != c.back {
			t.Errorf("%s: confirmed delete: status %d to %q, want 303 to %q: %s", c.name, resp.StatusCode, resp.Header.Get("Location"), c.back, resp.Body)
		}
		if err := admin.Get(ctx, key, c.obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s after the confirmed delete: %v, want not found", c.name, err)
		}
	}
	// Without the CSRF token even a confirmed delete is refused.
	if resp := u.postForm(t, instPath+"/delete", map[string]string{console.ConfirmField: "confirm-inst"}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a delete without the CSRF token: status %d, want 403", resp.StatusCode)
	}
}
