package validation_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/testenv"
	"github.com/marketplane/marketplane/pkg/validation"
)

// The binaries the flow tests deploy, built once into binDir.
var (
	binDir    string
	buildOnce sync.Once
	built     bool
)

// Images of the test providers.
const (
	sampleImage = "marketplane.local/sample:dev"
	probeImage  = "registry.invalid/validation/contractprobe:v1"
	brokenImage = "registry.invalid/validation/brokenprovider:v1"
)

// The flow tests share one in-process landscape (four API servers and the
// operator), started by the first test that needs it and stopped by
// TestMain: a landscape per flow cost four API-server starts each.
var (
	landscapeOnce sync.Once
	landscape     *providertest.Landscape
	landscapeErr  error
	// target runs the flows on landscape.
	target validation.Target
)

// Flows that would disturb each other on the shared landscape take turns.
// The sample provider and the broken provider both register kind Sample
// (group sample.services.openmcp.cloud, which the operator grants to one
// provider at a time; provider-delete also requires that no Sample is
// left), all three of their tests use the Sample and ManagedControlPlane
// tenant-a/demo, and the landscape has one (Exclusive) MCP cluster. The
// contract probe registers no kinds and needs no control plane, so its
// tests (under ServiceProviders of their own names) run alongside.
var sampleKind sync.Mutex

// sampleTenant is the namespace of the tests' Sample and control plane on
// the onboarding cluster.
const sampleTenant = "tenant-a"

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	// The landscapes' controllers log nothing; a failed step carries the
	// provider's own logs.
	ctrl.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "validation-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	code := m.Run()
	if landscape != nil {
		if err := landscape.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
	}
	return code
}

// sharedTarget builds the providers, starts the shared landscape (once)
// and returns the target on it. It skips the test under -short.
func sharedTarget(t *testing.T) validation.Target {
	t.Helper()
	dir := binaries(t)
	landscapeOnce.Do(func() {
		images := map[string]string{
			sampleImage: filepath.Join(dir, "sample"),
			probeImage:  filepath.Join(dir, "contractprobe"),
			brokenImage: filepath.Join(dir, "brokenprovider"),
		}
		landscape, landscapeErr = providertest.New(providertest.WithProviderImages(images), providertest.WithWorkloadControllers())
		if landscapeErr == nil {
			target = providertest.InProcessLandscape(landscape)
		}
	})
	if landscapeErr != nil {
		t.Fatalf("the shared landscape did not start: %v", landscapeErr)
	}
	return target
}

// takeTurn holds mu until the test (and its clean-ups registered later)
// ends.
func takeTurn(t *testing.T, mu *sync.Mutex) {
	t.Helper()
	mu.Lock()
	t.Cleanup(mu.Unlock)
}

// waitNamespaceSettled waits until the namespace name on the onboarding
// cluster is not being deleted: a flow deletes the namespaces it created
// without waiting, and the next flow could not create objects in it.
func waitNamespaceSettled(t *testing.T, name string) {
	t.Helper()
	c := landscape.Onboarding.Client
	err := waitFor(t.Context(), 2*time.Minute, func(ctx context.Context) (string, error) {
		ns := &corev1.Namespace{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
		switch {
		case apierrors.IsNotFound(err):
			return "", nil
		case err != nil:
			return err.Error(), nil
		case !ns.DeletionTimestamp.IsZero():
			return "namespace " + name + " is still being deleted", nil
		}
		return "", nil
	})
	if err != nil {
		t.Fatalf("onboarding cluster: %v", err)
	}
}

// waitFor polls cond every 200 ms until it reports nothing left to wait
// for (""), returns an error, or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func(context.Context) (string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		waiting, err := cond(ctx)
		if err != nil || waiting == "" {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s after %s", waiting, timeout)
		case <-tick.C:
		}
	}
}

// binaries builds the providers of the flow tests (once) and returns their
// directory. It skips the test under -short.
func binaries(t *testing.T) string {
	t.Helper()
	testenv.SkipIfShort(t)
	buildOnce.Do(func() {
		testenv.BuildBinaries(t, binDir,
			"github.com/marketplane/marketplane/providers/sample/cmd/sample",
			"github.com/marketplane/marketplane/internal/operator/deploy/process/internal/contractprobe",
			"github.com/marketplane/marketplane/pkg/validation/internal/brokenprovider")
		built = true
	})
	if !built {
		t.Fatal("building the providers failed (see the test that built them)")
	}
	return binDir
}

// withEnv sets spec.env of the spec's ServiceProvider.
func withEnv(t *testing.T, spec validation.Spec, env map[string]string) {
	t.Helper()
	var list []any
	for k, v := range env {
		list = append(list, map[string]any{"name": k, "value": v})
	}
	if err := unstructured.SetNestedSlice(spec.Provider.Object, list, "spec", "env"); err != nil {
		t.Fatal(err)
	}
}

// runBroken runs the flow expecting it to fail at step want with a message
// containing each of msgs, and returns that step. Each step waits up to
// two minutes (the machine may be busy), except the step expected to fail
// by timing out, which waits failAfter (0: it fails without waiting).
func runBroken(t *testing.T, spec validation.Spec, want string, failAfter time.Duration, msgs ...string) validation.Step {
	t.Helper()
	opts := []validation.Option{validation.WithTimeout(2 * time.Minute)}
	if failAfter > 0 {
		opts = append(opts, validation.WithStepTimeout(want, failAfter))
	}
	rep := validation.Run(t.Context(), spec, sharedTarget(t), opts...)
	var table strings.Builder
	_ = rep.WriteTable(&table)
	t.Logf("report:\n%s\n%s", table.String(), rep.FailureText())
	s := rep.FailedStep()
	if s == nil {
		t.Fatalf("the flow passed; want step %s to fail", want)
	}
	if s.ID != want {
		t.Fatalf("step %s failed, want %s", s.ID, want)
	}
	for _, m := range msgs {
		if !strings.Contains(s.Message, m) {
			t.Errorf("step %s: message %q does not contain %q", s.ID, s.Message, m)
		}
	}
	// The cause stays the first failure; the provider was cleaned up.
	steps := stepsOf(rep)
	if d := steps[validation.StepProviderDelete]; d.Result != validation.ResultPassed {
		t.Errorf("provider-delete after the failure: %s %q, want passed", d.Result, d.Message)
	}
	if d := steps[validation.StepTeardown]; d.Result != validation.ResultPassed {
		t.Errorf("teardown: %s %q, want passed", d.Result, d.Message)
	}
	return *s
}

// TestSampleProviderPasses runs the whole flow with the sample provider
// and examples/validate/sample, checking its DomainServiceAPI in the MCP.
func TestSampleProviderPasses(t *testing.T) {
	t.Parallel()
	target := sharedTarget(t)
	takeTurn(t, &sampleKind)
	waitNamespaceSettled(t, sampleTenant)
	files, err := filepath.Glob("../../examples/validate/sample/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := validation.SpecFromFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	check := func(ctx context.Context, env validation.CheckEnv) error {
		if env.ControlPlane == nil {
			return fmt.Errorf("no control plane")
		}
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("domain.sample.services.openmcp.cloud/v1alpha1")
		list.SetKind("SampleObjectList")
		if err := env.ControlPlane.Client.List(ctx, list); err != nil {
			return fmt.Errorf("list sampleobjects in the MCP: %w", err)
		}
		fmt.Fprintf(env.Out, "%d sampleobjects in %s %s/%s\n", len(list.Items), env.ControlPlane.Kind, env.ControlPlane.Namespace, env.ControlPlane.Name)
		return nil
	}
	rep := validation.Validate(t, spec, target, validation.WithCheck(check), validation.WithTimeout(2*time.Minute))
	for _, s := range rep.Steps {
		if s.Result != validation.ResultPassed {
			t.Errorf("step %s: %s %q, want passed", s.ID, s.Result, s.Message)
		}
	}
	steps := stepsOf(rep)
	for id, want := range map[string]string{
		validation.StepProviderInit:   "registered Sample.sample.services.openmcp.cloud",
		validation.StepControlPlane:   "Secret tenant-a/demo.admin.kubeconfig",
		validation.StepDomainService:  "MCP cluster: CRD sampleobjects.domain.sample.services.openmcp.cloud",
		validation.StepCheck:          "0 sampleobjects in ManagedControlPlane tenant-a/demo",
		validation.StepProviderDelete: "kept by design: CRD providerconfigs.sample.services.openmcp.cloud on the platform cluster, CRD samples.sample.services.openmcp.cloud on the onboarding cluster",
	} {
		if !strings.Contains(steps[id].Message, want) {
			t.Errorf("step %s: message %q does not contain %q", id, steps[id].Message, want)
		}
	}
}

// TestInitFailureFailsProviderInit: a provider whose init exits 1 fails
// provider-init at once, with the tail of init.log.
func TestInitFailureFailsProviderInit(t *testing.T) {
	t.Parallel()
	spec, err := validation.SpecFromFiles("testdata/broken/probe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withEnv(t, spec, map[string]string{"PROBE_OUT": t.TempDir(), "PROBE_INIT_EXIT": "1"})
	s := runBroken(t, spec, validation.StepProviderInit, 0, "ServiceProvider probe", "InitFailed")
	if !logsContain(s, "init.log", "init failing as asked with code 1") {
		t.Errorf("the failure carries no init.log with the probe's message: %+v", s.Failure)
	}
}

// TestRunCrashFailsProviderReady: a provider whose run process exits
// never becomes Ready; provider-ready fails at once on ProviderCrashing.
// Its ServiceProvider is named probe-crash, so that it runs alongside
// TestInitFailureFailsProviderInit's probe on the shared landscape.
func TestRunCrashFailsProviderReady(t *testing.T) {
	t.Parallel()
	spec, err := validation.SpecFromFiles("testdata/broken/probe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.Provider.SetName("probe-crash")
	withEnv(t, spec, map[string]string{"PROBE_OUT": t.TempDir(), "PROBE_RUN_CRASH": "1"})
	s := runBroken(t, spec, validation.StepProviderReady, 0, "ProviderCrashing")
	if !logsContain(s, "run-0.log", "run crashing as asked") {
		t.Errorf("the failure carries no run log with the probe's message: %+v", s.Failure)
	}
}

// TestServiceNeverReadyFailsServiceReady: a service object that never
// becomes Ready fails service-ready after the timeout, naming the object
// and its last condition.
func TestServiceNeverReadyFailsServiceReady(t *testing.T) {
	t.Parallel()
	sharedTarget(t)
	takeTurn(t, &sampleKind)
	waitNamespaceSettled(t, sampleTenant)
	spec, err := validation.SpecFromFiles("testdata/broken/serviceprovider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withEnv(t, spec, map[string]string{"BROKEN_MODE": "never-ready"})
	s := runBroken(t, spec, validation.StepServiceReady, 20*time.Second, "Sample tenant-a/demo", "not done after", "Ready=False NeverReady")
	if s.Failure == nil || s.Failure.Object != "Sample tenant-a/demo on the onboarding cluster" || len(s.Failure.Conditions) == 0 {
		t.Errorf("failure %+v, want the Sample with its conditions", s.Failure)
	}
}

// TestLeftCRDFailsDomainServiceGone: a provider whose deletion leaves its
// CRD in the MCP fails domain-service-gone, naming the CRD. The test then
// removes that CRD from the shared landscape's MCP cluster, so that a later
// flow there (this test again, with -count) sees it appear anew.
func TestLeftCRDFailsDomainServiceGone(t *testing.T) {
	t.Parallel()
	sharedTarget(t)
	takeTurn(t, &sampleKind)
	t.Cleanup(func() { removeLeftCRD(t) })
	waitNamespaceSettled(t, sampleTenant)
	spec, err := validation.SpecFromFiles("testdata/broken/serviceprovider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withEnv(t, spec, map[string]string{"BROKEN_MODE": "leave-crd"})
	runBroken(t, spec, validation.StepDomainServiceGone, 20*time.Second, "CRD "+leftCRD+" remains on the MCP cluster")
}

// leftCRD is the CRD the broken provider's mode leave-crd leaves behind.
const leftCRD = "brokenobjects.domain.sample.services.openmcp.cloud"

// removeLeftCRD deletes leftCRD from every MCP cluster of the shared
// landscape and waits until it is gone.
func removeLeftCRD(t *testing.T) {
	t.Helper()
	for _, mcp := range landscape.MCPClusters {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: leftCRD}}
		if err := mcp.Client.Delete(context.Background(), crd); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete CRD %s on %s: %v", leftCRD, mcp.Name, err)
			continue
		}
		err := waitFor(context.Background(), time.Minute, func(ctx context.Context) (string, error) {
			err := mcp.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)
			switch {
			case apierrors.IsNotFound(err):
				return "", nil
			case err != nil:
				return err.Error(), nil
			}
			return "CRD " + leftCRD + " still exists", nil
		})
		if err != nil {
			t.Errorf("%s: %v", mcp.Name, err)
		}
	}
}

// logsContain reports whether a log of s whose name ends in name has a
// line containing text.
func logsContain(s validation.Step, name, text string) bool {
	if s.Failure == nil {
		return false
	}
	for _, l := range s.Failure.Logs {
		if strings.HasSuffix(l.Name, name) && strings.Contains(strings.Join(l.Lines, "\n"), text) {
			return true
		}
	}
	return false
}

// TestInProcessLandscapeSetupErrors: InProcessLandscape without a landscape
// fails setup; on the shared landscape, an image its operator does not map
// fails setup naming the image and WithProviderImages, and the landscape
// is left running for the other flows.
func TestInProcessLandscapeSetupErrors(t *testing.T) {
	t.Parallel()
	spec, err := validation.SpecFromFiles("testdata/broken/probe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	setupOf := func(target validation.Target) validation.Step {
		t.Helper()
		rep := validation.Run(t.Context(), spec, target)
		steps := stepsOf(rep)
		if td := steps[validation.StepTeardown]; td.Result != validation.ResultPassed || td.Title != "target left running" {
			t.Errorf("teardown: %s %q %q, want passed, target left running", td.Result, td.Title, td.Message)
		}
		s := steps[validation.StepSetup]
		if s.Result != validation.ResultFailed {
			t.Fatalf("setup: %s %q, want failed", s.Result, s.Message)
		}
		return s
	}
	if s := setupOf(providertest.InProcessLandscape(nil)); !strings.Contains(s.Message, "no running providertest.Landscape given") {
		t.Errorf("no landscape: %q", s.Message)
	}

	target := sharedTarget(t)
	spec.Provider = spec.Provider.DeepCopy()
	spec.Provider.SetName("probe-unmapped")
	if err := unstructured.SetNestedField(spec.Provider.Object, "registry.invalid/validation/unmapped:v1", "spec", "image"); err != nil {
		t.Fatal(err)
	}
	s := setupOf(target)
	for _, want := range []string{`image "registry.invalid/validation/unmapped:v1" is not mapped`, "providertest.WithProviderImages"} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("unmapped image: %q does not contain %q", s.Message, want)
		}
	}
	if err := landscape.Platform.Client.Get(t.Context(), client.ObjectKey{Name: providertest.ClustersNamespace}, &corev1.Namespace{}); err != nil {
		t.Errorf("the shared landscape is not running after the flow: %v", err)
	}
}
