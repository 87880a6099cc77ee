package charts_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// platform is the one API server of the package (started by TestMain unless
// -short): without any CRD, so that the chart's own CRDs are what gets
// installed.
var platform *testenv.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if !testing.Short() {
		c, err := testenv.New(testenv.WithName("chart"), testenv.WithCRDs())
		if err != nil {
			fmt.Fprintln(os.Stderr, "start API server:", err)
			return 1
		}
		defer func() {
			if err := c.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stop API server:", err)
			}
		}()
		if err := installServiceMonitorCRD(c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		platform = c
	}
	return m.Run()
}

// installServiceMonitorCRD installs the stand-in ServiceMonitor and
// PrometheusRule CRDs of testdata (the Prometheus operator's CRDs are not
// part of the project).
func installServiceMonitorCRD(c *testenv.Cluster) error {
	for _, file := range []string{"testdata/servicemonitor-crd.yaml", "testdata/prometheusrule-crd.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read %s: %w", file, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("decode %s: %w", file, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = crdinstall.Apply(ctx, c.Client, "charts-test", 0, crd)
		cancel()
		if err != nil {
			return fmt.Errorf("install %s: %w", crd.Name, err)
		}
	}
	return nil
}

// apply creates every object on the package's API server, as `helm install`
// would: the release namespace first, the CRDs (created, or updated when an
// earlier value set installed them) until they are Established, then the
// rest in the render's order. Every object must be accepted.
func apply(t *testing.T, namespace string, objs []*unstructured.Unstructured) {
	t.Helper()
	testenv.SkipIfShort(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := platform.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create release namespace %s: %v", namespace, err)
	}
	var crds []string
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crds = append(crds, o.GetName())
		obj := o.DeepCopy()
		err := c.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err = c.Get(ctx, client.ObjectKeyFromObject(o), cur); err == nil {
				obj.SetResourceVersion(cur.GetResourceVersion())
				err = c.Update(ctx, obj)
			}
		}
		if err != nil {
			t.Fatalf("CRD %s not accepted: %v", o.GetName(), err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range crds {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, err
			}
			if !crdinstall.Established(crd) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the chart's CRDs were not Established within a minute: %v", err)
	}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if err := createServed(ctx, c, o.DeepCopy()); err != nil {
			t.Errorf("%s %s/%s not accepted: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// createServed creates obj, retrying while the client does not know its kind
// yet (a CRD is Established a moment before discovery shows it).
func createServed(ctx context.Context, c client.Client, obj client.Object) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, obj)
		switch {
		case last == nil:
			return true, nil
		case apimeta.IsNoMatchError(last):
			return false, nil
		}
		return false, last
	})
	if err != nil && last != nil {
		return last
	}
	return err
}
