package apply

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func testApplier() *Applier {
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, apimeta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, apimeta.RESTScopeRoot)
	mapper.Add(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, apimeta.RESTScopeRoot)
	return New(fake.NewClientBuilder().WithRESTMapper(mapper).Build())
}

func TestPrepare(t *testing.T) {
	labels := map[string]string{"interoperator.servicefabrik.io/instance-id": "i"}
	type want struct {
		Refs      []osbv1alpha1.Source
		Defaulted bool
		Labelled  bool
	}
	tests := map[string]struct {
		reason  string
		objs    []*unstructured.Unstructured
		want    want
		wantErr func(error) bool
	}{
		"DefaultsNamespace": {
			reason: "A namespaced object without a namespace gets the default one.",
			objs:   []*unstructured.Unstructured{obj("v1", "ConfigMap", "", "a"), obj("v1", "ConfigMap", "other", "b")},
			want: want{Refs: []osbv1alpha1.Source{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "tenant", Name: "a"}, {APIVersion: "v1", Kind: "ConfigMap", Namespace: "other", Name: "b"}},
				Defaulted: true, Labelled: true},
		},
		"ClusterScopedLosesNamespace": {
			reason: "A cluster-scoped object has no namespace, even when the template gives one.",
			objs:   []*unstructured.Unstructured{obj("v1", "Namespace", "x", "ns")},
			want:   want{Refs: []osbv1alpha1.Source{{APIVersion: "v1", Kind: "Namespace", Name: "ns"}}, Labelled: true},
		},
		"OrdersCRDsAndNamespacesFirst": {
			reason: "CRDs and Namespaces are applied before what may need them; the rest keep their order.",
			objs: []*unstructured.Unstructured{obj("v1", "ConfigMap", "ns", "a"), obj("v1", "Namespace", "", "ns"),
				obj("v1", "ConfigMap", "ns", "b"), obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "crd")},
			want: want{Refs: []osbv1alpha1.Source{
				{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "crd"},
				{APIVersion: "v1", Kind: "Namespace", Name: "ns"},
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a"},
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "b"},
			}, Labelled: true},
		},
		"NoName": {
			reason:  "An object without a name cannot be applied (seed 05's mis-indented metadata).",
			objs:    []*unstructured.Unstructured{obj("v1", "ConfigMap", "", "")},
			wantErr: isInvalidObject,
		},
		"NameNotAPathSegment": {
			reason:  "A name that cannot be part of a request path is refused before any request.",
			objs:    []*unstructured.Unstructured{obj("v1", "ConfigMap", "", "a/b")},
			wantErr: isInvalidObject,
		},
		"UnknownKind": {
			reason:  "A kind the cluster does not serve is reported as such.",
			objs:    []*unstructured.Unstructured{obj("kubedb.com/v1alpha1", "Postgres", "", "pg")},
			wantErr: isUnknownKind,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			refs, defaulted, err := testApplier().Prepare(tc.objs, "tenant", labels)
			if tc.wantErr != nil {
				if err == nil || !tc.wantErr(err) {
					t.Fatalf("%s\nPrepare() error = %v (%T), want another kind of error", tc.reason, err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nPrepare(): %v", tc.reason, err)
			}
			labelled := true
			for _, o := range tc.objs {
				labelled = labelled && o.GetLabels()["interoperator.servicefabrik.io/instance-id"] == "i"
			}
			got := want{Refs: refs, Defaulted: defaulted, Labelled: labelled}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func isInvalidObject(err error) bool {
	var e *InvalidObjectError
	return errors.As(err, &e)
}

func isUnknownKind(err error) bool {
	var e *UnknownKindError
	return errors.As(err, &e)
}

func TestIsPermanent(t *testing.T) {
	ref := osbv1alpha1.Source{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}
	gr := schema.GroupResource{Resource: "configmaps"}
	tests := map[string]struct {
		reason string
		err    error
		want   bool
	}{
		"Invalid":     {"The API server found the object invalid.", wrap(ref, "apply", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x", nil)), true},
		"BadRequest":  {"A malformed object.", wrap(ref, "apply", apierrors.NewBadRequest("bad")), true},
		"Forbidden":   {"The credentials may not write it.", wrap(ref, "apply", apierrors.NewForbidden(gr, "x", errors.New("no"))), true},
		"Terminating": {"A namespace being deleted passes.", wrap(ref, "apply", apierrors.NewForbidden(gr, "x", errors.New("unable to create new content in namespace n because it is being terminated"))), false},
		"Unavailable": {"A server error passes.", wrap(ref, "apply", apierrors.NewServiceUnavailable("later")), false},
		"Conflict":    {"A conflict passes.", wrap(ref, "apply", apierrors.NewConflict(gr, "x", errors.New("changed"))), false},
		"Invalid obj": {"An object that cannot be applied at all.", &InvalidObjectError{Index: 1, What: "v1 ConfigMap", Problem: "no name"}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := IsPermanent(tc.err); got != tc.want {
				t.Errorf("%s\nIsPermanent(%v) = %v, want %v", tc.reason, tc.err, got, tc.want)
			}
		})
	}
}

func TestDeleteCreatedNamespace(t *testing.T) {
	created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Labels: map[string]string{LabelCreatedNamespace: "true"}}}
	existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}
	refuse := func(err error) interceptor.Funcs {
		return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		}}
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "tenant", errors.New("confined identity"))
	tests := map[string]struct {
		reason      string
		existing    *corev1.Namespace
		funcs       interceptor.Funcs
		wantErr     bool
		wantDeleted bool
	}{
		"Created":   {reason: "A namespace the provisioner created is deleted.", existing: created, wantDeleted: true},
		"Existing":  {reason: "A namespace that existed before is left alone.", existing: existing},
		"Gone":      {reason: "A namespace that is gone is nothing to do."},
		"Forbidden": {reason: "An identity that may not read namespaces never created one: nothing to do, no error that would block deprovision.", existing: created, funcs: refuse(forbidden)},
		"Transient": {reason: "Other errors are returned, to be retried.", existing: created, funcs: refuse(apierrors.NewServiceUnavailable("down")), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithInterceptorFuncs(tc.funcs)
			if tc.existing != nil {
				b = b.WithObjects(tc.existing.DeepCopy())
			}
			c := b.Build()
			err := New(c).DeleteCreatedNamespace(context.Background(), "tenant")
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nDeleteCreatedNamespace() = %v; want error %t", tc.reason, err, tc.wantErr)
			}
			if tc.existing == nil {
				return
			}
			getErr := c.Get(context.Background(), client.ObjectKey{Name: "tenant"}, &corev1.Namespace{})
			if deleted := apierrors.IsNotFound(getErr); deleted != tc.wantDeleted {
				t.Errorf("%s\nnamespace deleted = %t (get: %v); want %t", tc.reason, deleted, getErr, tc.wantDeleted)
			}
		})
	}
}

func TestDeleteReportsWhatRemains(t *testing.T) {
	plain := func() client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "cm"}}
	}
	held := func() client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "cm", Finalizers: []string{"example.com/hold"}}}
	}
	labelled := func(uid string) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "cm", Labels: map[string]string{LabelInstanceUID: uid}}}
	}
	ref := osbv1alpha1.Source{APIVersion: "v1", Kind: "ConfigMap", Namespace: "tenant", Name: "cm"}
	tests := map[string]struct {
		reason        string
		existing      client.Object
		owner         *Owner
		calls         int
		wantRemaining int
		wantDeletes   int
	}{
		"AnotherInstances": {
			reason:   "An object labelled with another instance's UID is never deleted for this one, even when its status.resources lists it: it counts as gone.",
			existing: labelled("other"), owner: &Owner{InstanceUID: "mine"}, calls: 1, wantRemaining: 0, wantDeletes: 0,
		},
		"Mine": {
			reason:   "An object labelled with the owner's UID is deleted.",
			existing: labelled("mine"), owner: &Owner{InstanceUID: "mine"}, calls: 1, wantRemaining: 0, wantDeletes: 1,
		},
		"GoneAtOnce": {
			reason:   "An object without finalizers is gone once its DELETE is answered: nothing remains after the first call, so the caller does not wait for a second pass.",
			existing: plain(), calls: 1, wantRemaining: 0, wantDeletes: 1,
		},
		"Finalizing": {
			reason:   "An object held by a finalizer remains, and a later call does not delete it again (a namespace being finalized refuses that).",
			existing: held(), calls: 2, wantRemaining: 1, wantDeletes: 1,
		},
		"Missing": {
			reason: "An object that does not exist is gone, without a DELETE.",
			calls:  1, wantRemaining: 0, wantDeletes: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			deletes := 0
			b := fake.NewClientBuilder().WithRESTMapper(testApplier().mapper).WithInterceptorFuncs(interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					deletes++
					return c.Delete(ctx, obj, opts...)
				},
			})
			if tc.existing != nil {
				b = b.WithObjects(tc.existing)
			}
			a := New(b.Build())
			var remaining []osbv1alpha1.Source
			for range tc.calls {
				var err error
				if remaining, err = a.Delete(context.Background(), []osbv1alpha1.Source{ref}, tc.owner); err != nil {
					t.Fatalf("%s\nDelete() error: %v", tc.reason, err)
				}
			}
			if len(remaining) != tc.wantRemaining {
				t.Errorf("%s\nDelete() remaining = %v; want %d", tc.reason, remaining, tc.wantRemaining)
			}
			if deletes != tc.wantDeletes {
				t.Errorf("%s\nDELETE requests = %d; want %d", tc.reason, deletes, tc.wantDeletes)
			}
		})
	}
}
