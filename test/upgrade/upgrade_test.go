package upgrade_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/pkg/manifests"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/internal/crdcompat"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/marketplace"
	operatorapp "github.com/marketplane/marketplane/internal/operator/app"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// previous is the release whose objects this tree must serve: the newest
// directory under testdata.
const previous = "v0.1.0"

func previousCRDs(t *testing.T, release string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	list, err := crds.Load(os.DirFS(filepath.Join("testdata", release)), "crds")
	if err != nil {
		t.Fatalf("CRDs of %s: %v", release, err)
	}
	return list
}

// TestCRDsKeepWhatEveryReleaseWrote compares this tree's CRDs with those of
// every release under testdata: no stored version unserved, no field
// dropped, retyped or newly required, no enum value dropped.
func TestCRDsKeepWhatEveryReleaseWrote(t *testing.T) {
	current, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	releases, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range releases {
		t.Run(r.Name(), func(t *testing.T) {
			for _, problem := range crdcompat.CompareAll(previousCRDs(t, r.Name()), current) {
				t.Errorf("objects written by %s: %s", r.Name(), problem)
			}
		})
	}
}

// TestObjectsOfThePreviousReleaseAreServedAndReconciled installs the
// previous release's CRDs, writes one object of every kind as that release
// does, lets this tree's operator and inter-operator run init (which
// applies the new CRDs) and run, and checks that every object kept its
// fields, can be updated, and is reconciled.
func TestObjectsOfThePreviousReleaseAreServedAndReconciled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	env := testenv.Start(t, testenv.WithName("upgrade"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := env.Client

	if err := crdinstall.Apply(ctx, c, "marketplane-"+previous, 0, previousCRDs(t, previous)...); err != nil {
		t.Fatalf("install the %s CRDs: %v", previous, err)
	}
	kubeconfig, err := env.KubeconfigPath()
	must(t, err)
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "upgrade"}}))
	data, err := os.ReadFile(filepath.Join("testdata", previous, "objects.yaml"))
	must(t, err)
	written, err := manifests.Decode(data)
	must(t, err)
	for _, o := range written {
		if o.GetKind() == "Secret" {
			must(t, unstructured.SetNestedField(o.Object, string(env.Kubeconfig), "stringData", "kubeconfig"))
		}
		if err := c.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("create %s %s under the %s CRDs: %v", o.GetKind(), o.GetName(), previous, err)
		}
	}

	// init of every component applies this tree's CRDs, as an upgrade does:
	// the operator's, the inter-operator's and the marketplace's (its
	// Offering CRD, new since the previous release).
	common := []string{"--environment=test", "--kubeconfig=" + kubeconfig, "--onboarding-kubeconfig=" + kubeconfig}
	must(t, runOperator(ctx, append([]string{"init", "--provider-name=marketplane"}, common...)))
	t.Setenv("POD_NAMESPACE", "upgrade")
	t.Setenv("POD_NAME", "interoperator-0")
	io, err := interoperator.Provider()
	must(t, err)
	if code := io.MainWithArgs(ctx, append([]string{"init", "--provider-name=interoperator"}, common...)); code != 0 {
		t.Fatalf("inter-operator init exited %d", code)
	}
	must(t, marketplace.Init(ctx, c, 0))
	current, err := crds.All()
	must(t, err)
	for _, want := range current {
		got := &apiextensionsv1.CustomResourceDefinition{}
		must(t, c.Get(ctx, client.ObjectKey{Name: want.Name}, got))
		if !appliedBy(got, operatorapp.FieldOwner, io.Name, marketplace.FieldOwner) {
			t.Errorf("CRD %s: no init applied it after the %s CRDs", want.Name, previous)
		}
		for _, v := range got.Status.StoredVersions {
			if !served(got, v) {
				t.Errorf("CRD %s: stored version %s is not served", got.Name, v)
			}
		}
	}

	// Every field the previous release wrote is still there, and every
	// object can be written back under the new schema.
	for _, o := range written {
		if o.GetKind() == "Secret" {
			continue
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("read %s %s after the upgrade: %v", o.GetKind(), o.GetName(), err)
			continue
		}
		want := map[string]any{"spec": o.Object["spec"]}
		if annotations, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "metadata", "annotations"); ok {
			want["metadata"] = map[string]any{"annotations": annotations}
		}
		if diffs := testenv.FieldDiffs(want, got.Object); len(diffs) > 0 {
			t.Errorf("%s %s lost what %s wrote: %s", o.GetKind(), o.GetName(), previous, strings.Join(diffs, "; "))
		}
		if err := c.Update(ctx, got); err != nil {
			t.Errorf("write %s %s back under the new CRD: %v", o.GetKind(), o.GetName(), err)
		}
	}

	// Both components reconcile what the previous release wrote.
	dir := t.TempDir()
	images := filepath.Join(dir, "images.yaml")
	must(t, os.WriteFile(images, []byte("images: []\n"), 0o600))
	runs := make(chan error, 2)
	go func() {
		runs <- runOperator(ctx, append([]string{"run", "--provider-name=marketplane", "--deployer=process", "--process-images=" + images,
			"--state-dir=" + filepath.Join(dir, "state"), "--namespace=upgrade", "--metrics-bind-address=0",
			"--health-probe-bind-address=0", "--onboarding-retry-interval=200ms"}, common...))
	}()
	go func() {
		if code := io.MainWithArgs(ctx, append([]string{"run", "--provider-name=interoperator", "--metrics-bind-address=0", "--health-probe-bind-address=0"}, common...)); code != 0 {
			runs <- fmt.Errorf("inter-operator run exited %d", code)
			return
		}
		runs <- nil
	}()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			select {
			case err := <-runs:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("after cancellation: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("a component did not stop within 30 s of cancellation")
				return
			}
		}
	})
	for _, w := range []struct {
		kind, namespace, name string
		path                  []string
		want                  string
	}{
		{"ClusterRequest", "upgrade", "workload", []string{"status", "phase"}, "Granted"},
		{"AccessRequest", "upgrade", "reader", []string{"status", "phase"}, "Granted"},
		{"SFServiceInstance", "upgrade", "demo", []string{"status", "state"}, "succeeded"},
	} {
		o := find(t, written, w.kind, w.name)
		waitFor(t, fmt.Sprintf("%s %s/%s with %s %s", w.kind, w.namespace, w.name, strings.Join(w.path, "."), w.want), 2*time.Minute, runs, func(ctx context.Context) (string, error) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: w.name}, got); err != nil {
				return "", err
			}
			v, _, _ := unstructured.NestedString(got.Object, w.path...)
			status, _, _ := unstructured.NestedFieldNoCopy(got.Object, "status")
			switch v {
			case w.want:
				return "", nil
			case "failed":
				return "", final{fmt.Errorf("%s %s: status %v", w.kind, w.name, status)}
			}
			return fmt.Sprintf("status %v", status), nil
		})
	}
	// The provision template ran on the target: the instance's namespace.
	must(t, c.Get(ctx, client.ObjectKey{Name: "sf-demo"}, &corev1.Namespace{}))
	// Kinds whose controllers record the generation they saw.
	for _, kind := range []string{"ServiceProvider", "ManagedControlPlane", "ControlPlane"} {
		o := find(t, written, kind, "")
		waitFor(t, fmt.Sprintf("%s %s reconciled (status.observedGeneration)", kind, o.GetName()), 2*time.Minute, runs, func(ctx context.Context) (string, error) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
				return "", err
			}
			seen, ok, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
			if ok && seen == got.GetGeneration() {
				return "", nil
			}
			status, _, _ := unstructured.NestedFieldNoCopy(got.Object, "status")
			return fmt.Sprintf("generation %d, status %v", got.GetGeneration(), status), nil
		})
	}
}

// appliedBy reports whether one of the field managers applied the CRD.
func appliedBy(crd *apiextensionsv1.CustomResourceDefinition, managers ...string) bool {
	for _, m := range crd.ManagedFields {
		if m.Operation == metav1.ManagedFieldsOperationApply && slices.Contains(managers, m.Manager) {
			return true
		}
	}
	return false
}

func served(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Served
		}
	}
	return false
}

// find returns the written object of kind, with name unless name is empty.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	t.Fatalf("testdata has no %s %s", kind, name)
	return nil
}

func runOperator(ctx context.Context, args ...[]string) error {
	cmd := operatorapp.NewCommand()
	var all []string
	for _, a := range args {
		all = append(all, a...)
	}
	cmd.SetArgs(all)
	cmd.SetOut(os.Stderr)
	cmd.SetErr(os.Stderr)
	return cmd.ExecuteContext(ctx)
}

// waitFor polls check until it returns no detail, failing the test with
// the last detail after timeout, or at once when a component exited.
func waitFor(t *testing.T, what string, timeout time.Duration, runs chan error, check func(context.Context) (string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-runs:
			if err == nil {
				return false, errors.New("a component exited")
			}
			return false, fmt.Errorf("a component exited: %w", err)
		default:
		}
		detail, err := check(ctx)
		var f final
		if errors.As(err, &f) {
			return false, f.error
		}
		if err != nil {
			if ctx.Err() == nil {
				last = err.Error()
			}
			return false, nil
		}
		last = detail
		return detail == "", nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last seen: %s", what, err, last)
	}
}

// final is an error of a check that ends the wait: the object reached a
// state it does not leave by itself.
type final struct{ error }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
