package console_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// TestBindingsByInstanceName: the inter-operator finds a binding's instance
// by name (spec.instanceId of the binding is the instance's name, or for
// the broker's hashed names its SHA-224), never by what an instance writes
// in its own spec.instanceId. The console lists and creates bindings by the
// same rule: tenant A's instance alias-a, whose spec.instanceId says
// alias-b, neither shows the bindings of alias-b nor creates a binding that
// binds alias-b; alias-b shows its binding; an instance named like the
// broker names the instance of an id that is no DNS label shows the
// bindings of that id.
func TestBindingsByInstanceName(t *testing.T) {
	e := setup(t)
	cs := startConsole(t, e, false, nil)
	u := signIn(t, cs, e.tokenA)
	ctx := t.Context()
	admin := e.cluster.Client
	const oddID = "Odd ID/1"
	sum := sha256.Sum224([]byte(oddID))
	hashed := hex.EncodeToString(sum[:])
	instance := func(name, id string) *osbv1alpha1.SFServiceInstance {
		return &osbv1alpha1.SFServiceInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: name},
			Spec: osbv1alpha1.SFServiceInstanceSpec{InstanceID: id, ServiceID: e.serviceID, PlanID: e.planID,
				Parameters: &runtime.RawExtension{Raw: []byte(`{}`)}},
		}
	}
	binding := func(name, instanceID string) *osbv1alpha1.SFServiceBinding {
		return &osbv1alpha1.SFServiceBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: name},
			Spec:       osbv1alpha1.SFServiceBindingSpec{ID: name, InstanceID: instanceID, ServiceID: e.serviceID, PlanID: e.planID},
		}
	}
	for _, o := range []client.Object{
		instance("alias-a", "alias-b"), instance("alias-b", "alias-b"), instance(hashed, oddID),
		binding("of-alias-b", "alias-b"), binding("of-odd-id", oddID),
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}

	shows := func(instanceName, bindingName string) bool {
		t.Helper()
		code, body := u.get(t, "/ns/"+nsA+"/sf/"+instanceName)
		if code != http.StatusOK {
			t.Fatalf("GET the page of %s: %d", instanceName, code)
		}
		return strings.Contains(body, `data-name="`+bindingName+`"`)
	}
	if shows("alias-a", "of-alias-b") {
		t.Error("the page of alias-a lists of-alias-b, a binding of alias-b")
	}
	if !shows("alias-b", "of-alias-b") {
		t.Error("the page of alias-b does not list its binding of-alias-b")
	}
	if !shows(hashed, "of-odd-id") {
		t.Errorf("the page of %s (the broker's name for %q) does not list of-odd-id", hashed, oddID)
	}

	resp := u.postForm(t, "/ns/"+nsA+"/sf/alias-a/bindings", map[string]string{"csrf": u.csrf, "binding": "bind-alias-a"})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bind alias-a: status %d: %s", resp.StatusCode, resp.Body)
	}
	b := &osbv1alpha1.SFServiceBinding{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "bind-alias-a"}, b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.InstanceID != "alias-a" {
		t.Errorf("the binding created on alias-a has spec.instanceId %q: the inter-operator would bind that instance, want alias-a", b.Spec.InstanceID)
	}
	if !shows("alias-a", "bind-alias-a") || shows("alias-b", "bind-alias-a") {
		t.Error("bind-alias-a is not listed on alias-a alone")
	}
}
