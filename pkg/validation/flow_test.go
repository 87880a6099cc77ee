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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

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
	return m.Run()
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
	rep := validation.Run(t.Context(), spec, validation.InProcess(), opts...)
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
	dir := binaries(t)
	files, err := filepath.Glob("../../examples/validate/sample/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := validation.SpecFromFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	spec.Images = map[string]string{sampleImage: filepath.Join(dir, "sample")}
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
	rep := validation.Validate(t, spec, validation.InProcess(), validation.WithCheck(check), validation.WithTimeout(2*time.Minute))
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
	dir := binaries(t)
	spec, err := validation.SpecFromFiles("testdata/broken/probe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.Images = map[string]string{probeImage: filepath.Join(dir, "contractprobe")}
	withEnv(t, spec, map[string]string{"PROBE_OUT": t.TempDir(), "PROBE_INIT_EXIT": "1"})
	s := runBroken(t, spec, validation.StepProviderInit, 0, "ServiceProvider probe", "InitFailed")
	if !logsContain(s, "init.log", "init failing as asked with code 1") {
		t.Errorf("the failure carries no init.log with the probe's message: %+v", s.Failure)
	}
}

// TestRunCrashFailsProviderReady: a provider whose run process exits
// never becomes Ready; provider-ready fails at once on ProviderCrashing.
func TestRunCrashFailsProviderReady(t *testing.T) {
	t.Parallel()
	dir := binaries(t)
	spec, err := validation.SpecFromFiles("testdata/broken/probe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.Images = map[string]string{probeImage: filepath.Join(dir, "contractprobe")}
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
	dir := binaries(t)
	spec, err := validation.SpecFromFiles("testdata/broken/serviceprovider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.Images = map[string]string{brokenImage: filepath.Join(dir, "brokenprovider")}
	withEnv(t, spec, map[string]string{"BROKEN_MODE": "never-ready"})
	s := runBroken(t, spec, validation.StepServiceReady, 20*time.Second, "Sample tenant-a/demo", "not done after", "Ready=False NeverReady")
	if s.Failure == nil || s.Failure.Object != "Sample tenant-a/demo on the onboarding cluster" || len(s.Failure.Conditions) == 0 {
		t.Errorf("failure %+v, want the Sample with its conditions", s.Failure)
	}
}

// TestLeftCRDFailsDomainServiceGone: a provider whose deletion leaves its
// CRD in the MCP fails domain-service-gone, naming the CRD.
func TestLeftCRDFailsDomainServiceGone(t *testing.T) {
	t.Parallel()
	dir := binaries(t)
	spec, err := validation.SpecFromFiles("testdata/broken/serviceprovider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.Images = map[string]string{brokenImage: filepath.Join(dir, "brokenprovider")}
	withEnv(t, spec, map[string]string{"BROKEN_MODE": "leave-crd"})
	runBroken(t, spec, validation.StepDomainServiceGone, 20*time.Second, "CRD brokenobjects.domain.sample.services.openmcp.cloud remains on the MCP cluster")
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
