package stack

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestApplyManifestRetriesTransientRefusals applies a manifest through a
// client whose server refuses the first applies as an overloaded API
// server does (a timeout, then 429): the apply is sent again until it
// lands. A refusal of the object itself (422) ends the wait at once.
func TestApplyManifestRetriesTransientRefusals(t *testing.T) {
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetName("settings")
	m := manifest{file: "/tmp/settings.yaml", obj: cm}

	refusals := []error{
		apierrors.NewTimeoutError("request did not complete within requested timeout", 0),
		apierrors.NewTooManyRequests("the server is overloaded", 1),
	}
	applies := 0
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(clientgoscheme.Scheme)).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			applies++
			if applies <= len(refusals) {
				return refusals[applies-1]
			}
			return c.Apply(ctx, obj, opts...)
		},
	}).Build()
	none := func(context.Context) error { return nil }
	if err := applyManifest(context.Background(), c, 10*time.Second, m, none); err != nil {
		t.Fatalf("apply through %d transient refusals: %v", len(refusals), err)
	}
	if applies != len(refusals)+1 {
		t.Errorf("%d applies; want %d (each refusal sent again once)", applies, len(refusals)+1)
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "settings"}, got); err != nil {
		t.Fatalf("the applied ConfigMap: %v", err)
	}

	applies = 0
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "settings", nil)
	c = fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(clientgoscheme.Scheme)).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			applies++
			return invalid
		},
	}).Build()
	err := applyManifest(context.Background(), c, 10*time.Second, m, none)
	if !errors.Is(err, invalid) || !strings.Contains(err.Error(), "apply ConfigMap settings") {
		t.Errorf("apply of an invalid object: %v; want the 422, naming the object", err)
	}
	if applies != 1 {
		t.Errorf("an invalid object was sent %d times; want once", applies)
	}
}
