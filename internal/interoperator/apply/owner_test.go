package apply

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func TestOwner(t *testing.T) {
	cm := osbv1alpha1.Source{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm"}
	instance := Owner{InstanceUID: "uid-a", InstanceID: "db-1234", LegacyInstanceID: "db", Recorded: []osbv1alpha1.Source{cm}}
	binding := instance
	binding.BindingUID, binding.BindingID, binding.LegacyBindingID = "uid-b1", "b1", "b1"
	unrecorded := instance
	unrecorded.Recorded = nil
	tests := map[string]struct {
		reason      string
		owner       Owner
		labels      map[string]string
		wantOwns    bool
		wantForeign bool
		wantAnother bool
	}{
		"SameUID": {
			reason: "An object labelled with the instance's UID is its own.",
			owner:  instance, labels: map[string]string{LabelInstanceUID: "uid-a", LabelInstanceID: "db-1234"}, wantOwns: true,
		},
		"OtherUIDSameName": {
			reason: "An object labelled with another UID is another instance's, whatever its name label says: the issue's takeover.",
			owner:  instance, labels: map[string]string{LabelInstanceUID: "uid-x", LabelInstanceID: "db-1234"}, wantForeign: true, wantAnother: true,
		},
		"Unlabelled": {
			reason: "An object without instance labels is nobody's: not owned, not foreign.",
			owner:  instance, labels: nil,
		},
		"LegacyRecorded": {
			reason: "An object labelled with the bare name before the UID labels existed is the instance's when its status.resources lists it (an upgrade).",
			owner:  instance, labels: map[string]string{LabelInstanceID: "db"}, wantOwns: true,
		},
		"LegacyUnrecorded": {
			reason: "The same bare-name label on an object the instance never recorded is another tenant's instance of the same name.",
			owner:  unrecorded, labels: map[string]string{LabelInstanceID: "db"}, wantForeign: true,
		},
		"InstanceObjectForBinding": {
			reason: "A binding's operation may use its instance's objects.",
			owner:  binding, labels: map[string]string{LabelInstanceUID: "uid-a"}, wantOwns: true,
		},
		"OtherBinding": {
			reason: "An object of another binding of the same instance is foreign to a binding.",
			owner:  binding, labels: map[string]string{LabelInstanceUID: "uid-a", LabelBindingUID: "uid-b2"}, wantForeign: true, wantAnother: true,
		},
		"OwnBinding": {
			reason: "The binding's own object.",
			owner:  binding, labels: map[string]string{LabelInstanceUID: "uid-a", LabelBindingUID: "uid-b1"}, wantOwns: true,
		},
		"OwnBindingOfAnotherInstance": {
			reason: "For deletion a binding's own UID label decides, whatever instance the object names: a binding outliving its instance resolves to a new one of the same name.",
			owner:  binding, labels: map[string]string{LabelInstanceUID: "uid-old", LabelBindingUID: "uid-b1"}, wantForeign: true, wantAnother: false,
		},
		"BindingObjectForInstance": {
			reason: "The instance's own operations may use its bindings' objects.",
			owner:  instance, labels: map[string]string{LabelInstanceUID: "uid-a", LabelBindingUID: "uid-b2"}, wantOwns: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.owner.owns(tc.labels, cm); got != tc.wantOwns {
				t.Errorf("%s\nowns() = %t, want %t", tc.reason, got, tc.wantOwns)
			}
			if got, _ := tc.owner.foreign(tc.labels, cm); got != tc.wantForeign {
				t.Errorf("%s\nforeign() = %t, want %t", tc.reason, got, tc.wantForeign)
			}
			if got := tc.owner.another(tc.labels); got != tc.wantAnother {
				t.Errorf("%s\nanother() = %t, want %t", tc.reason, got, tc.wantAnother)
			}
		})
	}
}

func TestOwnerLabels(t *testing.T) {
	o := Owner{InstanceUID: "u", InstanceID: "i"}
	if got := o.Labels(); len(got) != 2 || got[LabelInstanceUID] != "u" || got[LabelInstanceID] != "i" {
		t.Errorf("instance labels = %v", got)
	}
	o.BindingUID, o.BindingID = "bu", "b"
	if got := o.Labels(); len(got) != 4 || got[LabelBindingUID] != "bu" || got[LabelBindingID] != "b" {
		t.Errorf("binding labels = %v", got)
	}
}

// TestCheckNoAdoption checks that Check refuses objects another instance
// owns, and reads objects only where another instance's can be.
func TestCheckNoAdoption(t *testing.T) {
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, apimeta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, apimeta.RESTScopeRoot)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, apimeta.RESTScopeRoot)
	other := map[string]string{LabelInstanceUID: "other", LabelInstanceID: "db"}
	mine := map[string]string{LabelInstanceUID: "me", LabelInstanceID: "db"}
	existing := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "taken", Labels: other}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mine", Labels: mine}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "theirs", Labels: other}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "theirs", Labels: other}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "plain"}},
	}
	p := Policy{Owner: Owner{InstanceUID: "me", InstanceID: "db"}, DefaultNamespace: "tenant", Namespaces: []string{"shared"}}
	tests := map[string]struct {
		reason    string
		objs      []*unstructured.Unstructured
		wantRule  string
		wantReads int
	}{
		"TakenNamespace": {
			reason: "A rendered Namespace that exists labelled for another instance is refused as a conflict.",
			objs:   []*unstructured.Unstructured{obj("v1", "Namespace", "", "taken")}, wantRule: RuleNoAdoption, wantReads: 1,
		},
		"ObjectInTakenNamespace": {
			reason: "An object in another instance's namespace is refused without reading the object.",
			objs:   []*unstructured.Unstructured{obj("v1", "ConfigMap", "taken", "cm")}, wantRule: RuleNoAdoption, wantReads: 1,
		},
		"OthersObjectInDefaultNamespace": {
			reason: "The default namespace is shared by the instances of one onboarding namespace: an existing object of another instance there is refused.",
			objs:   []*unstructured.Unstructured{obj("v1", "ConfigMap", "tenant", "theirs")}, wantRule: RuleNoAdoption, wantReads: 1,
		},
		"OthersObjectInGrantedNamespace": {
			reason: "A granted namespace is shared too.",
			objs:   []*unstructured.Unstructured{obj("v1", "ConfigMap", "shared", "theirs")}, wantRule: RuleNoAdoption, wantReads: 1,
		},
		"UnlabelledObjectInGrantedNamespace": {
			reason: "An object no instance labelled may be applied over, as before.",
			objs:   []*unstructured.Unstructured{obj("v1", "ConfigMap", "shared", "plain")}, wantReads: 1,
		},
		"OwnNamespaceNoObjectReads": {
			reason: "In a namespace labelled for the instance only its objects can be: the namespace is read, its objects are not.",
			objs:   []*unstructured.Unstructured{obj("v1", "ConfigMap", "mine", "a"), obj("v1", "ConfigMap", "mine", "b")}, wantReads: 1,
		},
		"RulesOfTheObjectFirst": {
			reason:   "An object refused by itself is named before a conflict elsewhere in the render: who won a race for a shared name never hides the attack.",
			objs:     []*unstructured.Unstructured{obj("v1", "ConfigMap", "tenant", "theirs"), obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "escalate")},
			wantRule: RuleNamespacedKinds, wantReads: 0,
		},
		"NewNamespaceNoObjectReads": {
			reason: "Nor in a namespace the render creates.",
			objs:   []*unstructured.Unstructured{obj("v1", "Namespace", "", "fresh"), obj("v1", "ConfigMap", "fresh", "a")}, wantReads: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reads := 0
			c := fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(existing...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					reads++
					return c.Get(ctx, key, obj, opts...)
				},
			}).Build()
			err := New(c).Check(context.Background(), tc.objs, p)
			var refused *RefusedError
			switch {
			case tc.wantRule == "" && err != nil:
				t.Errorf("%s\nCheck() = %v, want no error", tc.reason, err)
			case tc.wantRule != "" && (!errors.As(err, &refused) || refused.Rule != tc.wantRule):
				t.Errorf("%s\nCheck() = %v, want rule %s", tc.reason, err, tc.wantRule)
			}
			if reads != tc.wantReads {
				t.Errorf("%s\nreads = %d, want %d", tc.reason, reads, tc.wantReads)
			}
		})
	}
}
