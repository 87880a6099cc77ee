package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/testenv"
	"github.com/marketplane/marketplane/pkg/validation"
)

// validateBinaries are the binaries the validation tests run: the CLI, the
// two providers they validate, and the check command of the CLI runs.
var validateBinaries = []string{
	"github.com/marketplane/marketplane/cmd/marketplane",
	"github.com/marketplane/marketplane/cmd/marketplane-interoperator",
	"github.com/marketplane/marketplane/providers/sample/cmd/sample",
	"github.com/marketplane/marketplane/test/e2e/testdata/domaincheck",
}

// The binaries of validateBinaries, built once for the tests that need
// them into a directory TestMain removes.
var (
	binDir    string
	buildOnce sync.Once
	built     bool
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	// The in-process targets' controllers log nothing; a failed step
	// carries the provider's own logs.
	ctrl.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "marketplane-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	return m.Run()
}

// binaries builds validateBinaries (once) and returns their directory. It
// skips the test under -short.
func binaries(t *testing.T) string {
	t.Helper()
	testenv.SkipIfShort(t)
	buildOnce.Do(func() {
		testenv.BuildBinaries(t, binDir, validateBinaries...)
		built = true
	})
	if !built {
		t.Fatal("building the binaries failed (see the test that built them)")
	}
	return binDir
}

// sampleDomainKind is the sample provider's DomainServiceAPI as
// domaincheck's -resource takes it.
const sampleDomainKind = "SampleObject.v1alpha1.domain.sample.services.openmcp.cloud"

// cliRun is the outcome of one `marketplane validate` process.
type cliRun struct {
	exitCode int
	report   validation.Report
	stderr   string
	junit    junitSuites
}

// junitSuites is what the tests read of the JUnit XML of --junit.
type junitSuites struct {
	Suites []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// validateSample runs `marketplane validate` as a user does, from the
// checkout's root: the sample provider of examples/validate/sample on the
// in-process target, the report as JSON on stdout and as JUnit XML in a
// file, with check as --check.
func validateSample(t *testing.T, bin, check string) cliRun {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	assets, err := testenv.BinaryDir()
	if err != nil {
		// Not a skip: `make test-e2e` builds the tools.
		t.Fatal(err)
	}
	junitPath := filepath.Join(t.TempDir(), "report.xml")
	args := []string{"validate",
		"-f", "examples/validate/sample/serviceprovider.yaml",
		"-f", "examples/validate/sample/providerconfig.yaml",
		"-f", "examples/validate/sample/sample.yaml",
		"--binary", filepath.Join(bin, "sample"),
		"--bin-dir", assets,
		"--timeout", "2m",
		"--output", "json",
		"--junit", junitPath,
		"--check", check,
	}
	// Stopped like a user stops it (SIGTERM: it cleans up) when the test
	// ends early, and with everything it started (its process group)
	// should that not end it.
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-2*time.Minute))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "marketplane"), args...)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	defer func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // nothing left: ESRCH
		}
	}()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	err = cmd.Run()
	t.Logf("marketplane %s: %v after %s; progress:\n%s", strings.Join(args, " "), err, time.Since(begin).Round(100*time.Millisecond), stderr.String())
	run := cliRun{stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		run.exitCode = exit.ExitCode()
	case err != nil:
		t.Fatalf("run marketplane validate: %v", err)
	}
	if err := json.Unmarshal(stdout.Bytes(), &run.report); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, stdout.String())
	}
	raw, err := os.ReadFile(junitPath)
	if err != nil {
		t.Fatalf("--junit: %v", err)
	}
	if err := xml.Unmarshal(raw, &run.junit); err != nil {
		t.Fatalf("--junit wrote no JUnit XML: %v\n%s", err, raw)
	}
	if len(run.junit.Suites) != 1 {
		t.Fatalf("JUnit XML has %d test suites, want 1:\n%s", len(run.junit.Suites), raw)
	}
	return run
}

// stepsByID indexes a report's steps.
func stepsByID(rep validation.Report) map[string]validation.Step {
	m := make(map[string]validation.Step, len(rep.Steps))
	for _, s := range rep.Steps {
		m[s.ID] = s
	}
	return m
}

// TestValidateSampleCLI runs the real `marketplane validate` process on the
// sample provider (examples/validate/sample) with a check that uses its
// DomainServiceAPI in the tenant's MCP cluster (create, read and delete a
// SampleObject), once passing and once with a check that fails.
func TestValidateSampleCLI(t *testing.T) {
	bin := binaries(t)
	t.Parallel()
	domaincheck := filepath.Join(bin, "domaincheck")

	t.Run("passes", func(t *testing.T) {
		t.Parallel()
		run := validateSample(t, bin, domaincheck+" -resource "+sampleDomainKind)
		if run.exitCode != 0 {
			t.Errorf("exit code %d, want 0", run.exitCode)
		}
		rep := run.report
		if !rep.Passed || rep.Provider != "sample" || rep.Target != "in-process" {
			t.Errorf("report: passed %t, provider %q, target %q; want passed, sample, in-process", rep.Passed, rep.Provider, rep.Target)
		}
		var ids []string
		for _, s := range rep.Steps {
			ids = append(ids, s.ID)
			if s.Result != validation.ResultPassed {
				t.Errorf("step %s: %s %q, want passed", s.ID, s.Result, s.Message)
			}
		}
		if !reflect.DeepEqual(ids, validation.StepIDs) {
			t.Errorf("steps %v, want %v", ids, validation.StepIDs)
		}
		steps := stepsByID(rep)
		for _, want := range []string{
			"created SampleObject default/domaincheck",
			"read SampleObject default/domaincheck",
			"deleted SampleObject default/domaincheck",
		} {
			if !strings.Contains(steps[validation.StepCheck].Message, want) {
				t.Errorf("check step: message %q does not contain %q", steps[validation.StepCheck].Message, want)
			}
		}
		if msg := steps[validation.StepDomainService].Message; !strings.Contains(msg, "MCP cluster: CRD sampleobjects.domain.sample.services.openmcp.cloud") {
			t.Errorf("domain-service step: message %q does not name the CRD in the MCP cluster", msg)
		}
		suite := run.junit.Suites[0]
		if suite.Tests != len(validation.StepIDs) || suite.Failures != 0 || suite.Skipped != 0 {
			t.Errorf("JUnit suite: %d tests, %d failures, %d skipped; want %d, 0, 0", suite.Tests, suite.Failures, suite.Skipped, len(validation.StepIDs))
		}
	})

	t.Run("failing check", func(t *testing.T) {
		t.Parallel()
		// A namespace the MCP cluster does not have: the check's create
		// fails there and the command exits 1.
		run := validateSample(t, bin, domaincheck+" -resource "+sampleDomainKind+" -namespace no-such-namespace")
		if run.exitCode != 1 {
			t.Errorf("exit code %d, want 1", run.exitCode)
		}
		if run.report.Passed {
			t.Error("the report passed, want failed")
		}
		steps := stepsByID(run.report)
		check := steps[validation.StepCheck]
		if check.Result != validation.ResultFailed || !strings.Contains(check.Message, "exited with code 1") || !strings.Contains(check.Message, `namespaces "no-such-namespace" not found`) {
			t.Errorf("check step: %s %q, want failed, exit code 1, with the check's error", check.Result, check.Message)
		}
		for _, id := range validation.StepIDs {
			s := steps[id]
			switch id {
			case validation.StepCheck:
			case validation.StepDomainServiceGone:
				// Skipped after the failure: the check step is the cause.
				if s.Result != validation.ResultSkipped {
					t.Errorf("step %s: %s %q, want skipped", id, s.Result, s.Message)
				}
			default:
				// Before the check everything passed; the clean-up
				// steps still ran and cleaned up.
				if s.Result != validation.ResultPassed {
					t.Errorf("step %s: %s %q, want passed", id, s.Result, s.Message)
				}
			}
		}
		suite := run.junit.Suites[0]
		if suite.Failures != 1 {
			t.Errorf("JUnit suite: %d failures, want 1", suite.Failures)
		}
		for _, c := range suite.Cases {
			if (c.Failure != nil) != strings.Contains(c.Name, " "+validation.StepCheck+":") {
				t.Errorf("JUnit test case %q: failure %t", c.Name, c.Failure != nil)
			}
		}
		if !strings.Contains(run.stderr, "✗") {
			t.Errorf("progress on stderr marks no failed step:\n%s", run.stderr)
		}
	})
}

// interoperatorManifests are the manifests of the inter-operator's
// validation: the provider and what it needs from examples/validate/
// interoperator, the sample catalog's kubernetes-namespace service and
// its plan small from examples/catalog, and the tenant's SFServiceInstance.
var interoperatorManifests = []string{
	"../../examples/validate/interoperator/serviceprovider.yaml",
	"../../examples/validate/interoperator/rbac.yaml",
	"../../examples/validate/interoperator/providerconfig.yaml",
	"../../examples/catalog/service.yaml",
	"../../examples/catalog/plan-small.yaml",
	"../../examples/validate/interoperator/sfserviceinstance.yaml",
}

// interoperatorImage is the image of examples/validate/interoperator.
const interoperatorImage = "marketplane.local/marketplane-interoperator:dev"

// TestValidateInterOperator validates the inter-operator as a
// ServiceProvider (library call, in-process target): it registers the
// target's workload Cluster as its SFCluster, loads the sample catalog's
// kubernetes-namespace service, and provisions an SFServiceInstance of the
// plan small as the service object, whose namespace on the workload
// cluster the check looks at; deleting it must leave nothing behind.
func TestValidateInterOperator(t *testing.T) {
	validateInterOperator(t)
}

// validateInterOperator is TestValidateInterOperator on an in-process
// target with opts.
func validateInterOperator(t *testing.T, opts ...providertest.Option) {
	bin := binaries(t)
	t.Parallel()
	spec, err := validation.SpecFromFiles(interoperatorManifests...)
	if err != nil {
		t.Fatal(err)
	}
	// The example's access policy is the one the inter-operator needs.
	raw, _, err := unstructured.NestedMap(spec.Provider.Object, "spec", "accessPolicy")
	if err != nil {
		t.Fatal(err)
	}
	policy := &providerv1alpha1.AccessPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, policy); err != nil {
		t.Fatal(err)
	}
	if want := interoperator.AccessPolicy(); !reflect.DeepEqual(policy, want) {
		t.Fatalf("spec.accessPolicy of serviceprovider.yaml is %+v, want interoperator.AccessPolicy() %+v", policy, want)
	}
	spec.Images = map[string]string{interoperatorImage: filepath.Join(bin, "marketplane-interoperator")}

	// The platform cluster, as the check found it, for the steps after it.
	var platform client.Client
	check := func(ctx context.Context, env validation.CheckEnv) error {
		if len(env.Services) != 1 || env.Workload == nil {
			return fmt.Errorf("want one service object and a workload cluster, got %d and %v", len(env.Services), env.Workload != nil)
		}
		platform = env.Platform
		if env.ControlPlane != nil {
			return fmt.Errorf("the flow created %s %s/%s; the inter-operator's instances are not per control plane", env.ControlPlane.Kind, env.ControlPlane.Namespace, env.ControlPlane.Name)
		}
		inst := env.Services[0]
		state, _, _ := unstructured.NestedString(inst.Object, "status", "state")
		clusterID, _, _ := unstructured.NestedString(inst.Object, "spec", "clusterId")
		if state != "succeeded" || clusterID != "workload" {
			return fmt.Errorf("SFServiceInstance %s/%s: state %q on cluster %q, want succeeded on workload", inst.GetNamespace(), inst.GetName(), state, clusterID)
		}
		ns := "sf-" + provisioner.InstanceID(inst.GetNamespace(), inst.GetName())
		if err := env.Workload.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
			return fmt.Errorf("the instance's namespace on the workload cluster: %w", err)
		}
		quota := &corev1.ResourceQuota{}
		if err := env.Workload.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quota"}, quota); err != nil {
			return fmt.Errorf("the instance's quota on the workload cluster: %w", err)
		}
		// The instance's parameter pods: 5, not the plan's default 10.
		if got := quota.Spec.Hard[corev1.ResourcePods]; got.Cmp(resource.MustParse("5")) != 0 {
			return fmt.Errorf("ResourceQuota %s/quota allows %s pods, want the instance's 5", ns, got.String())
		}
		fmt.Fprintf(env.Out, "SFServiceInstance %s/%s succeeded on SFCluster %s: namespace %s with a quota of %s pods\n", inst.GetNamespace(), inst.GetName(), clusterID, ns, quota.Spec.Hard.Pods().String())
		return nil
	}
	var offboarded, leftovers []string
	progress := validation.WithProgress(func(e validation.Event) {
		if !e.Done {
			return
		}
		t.Logf("validation: step %s %s (%s) %s", e.Step.ID, e.Step.Result, e.Step.Duration.Round(100*time.Millisecond), firstLine(e.Step.Message))
		switch {
		case e.Step.ID == validation.StepServiceDelete && platform != nil:
			offboarded = offboardWorkloadClusters(t.Context(), platform)
		case e.Step.ID == validation.StepProviderDelete && platform != nil:
			leftovers = workloadRegistrations(t.Context(), platform)
			if err := waitNamespaceGone(t.Context(), platform, "interoperator"); err != nil {
				leftovers = append(leftovers, err.Error())
			}
		}
	})
	rep := validation.Validate(t, spec, providertest.InProcess(opts...), validation.WithCheck(check), validation.WithTimeout(2*time.Minute), progress)
	for _, l := range offboarded {
		t.Errorf("not offboarded after the instance was deleted: %s", l)
	}
	// Nothing the inter-operator registered outlives it: a granted
	// AccessRequest left behind is access to the workload cluster that
	// nobody holds any more, and an SFCluster keeps the finalizer only the
	// inter-operator removes.
	for _, l := range leftovers {
		t.Errorf("left behind on the platform cluster after provider-delete: %s", l)
	}
	steps := stepsByID(*rep)
	for _, s := range rep.Steps {
		want := validation.ResultPassed
		if s.ID == validation.StepControlPlane || s.ID == validation.StepControlPlaneGone {
			// The inter-operator registers no service kinds: no MCP.
			want = validation.ResultSkipped
		}
		if s.Result != want {
			t.Errorf("step %s: %s %q, want %s", s.ID, s.Result, s.Message, want)
		}
	}
	// The example instance tenant-a/demo's namespace: sf-<instanceId>.
	demoNamespace := "sf-" + provisioner.InstanceID("tenant-a", "demo")
	for id, want := range map[string]string{
		validation.StepProviderInit:   "registered no service kinds",
		validation.StepProviderConfig: "service objects: SFServiceInstance tenant-a/demo",
		validation.StepDomainService:  "workload cluster: namespace " + demoNamespace + ", namespace sfb-",
		validation.StepCheck:          "SFServiceInstance tenant-a/demo succeeded on SFCluster workload: namespace " + demoNamespace + " with a quota of 5 pods",
	} {
		if !strings.Contains(steps[id].Message, want) {
			t.Errorf("step %s: message %q does not contain %q", id, steps[id].Message, want)
		}
	}
}

// firstLine is the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// offboardWorkloadClusters has the running inter-operator offboard the
// workload Clusters it registered, the documented way
// (docs/multicluster.md): its ProviderConfig's spec.workloadClusters
// selects no Cluster any more, so it deletes their SFClusters (whose
// finalizer it removes) and then their AccessRequests. Deleting the
// ProviderConfig would not: that leaves the registrations as they are, and
// once the inter-operator is gone nobody removes the SFClusters'
// finalizer. The validation flow deletes the ProviderConfig, the RBAC and
// the ServiceProvider at once, so the platform operator's step before
// removing the inter-operator is taken here, after the instance is gone.
// It returns the registrations that remain.
func offboardWorkloadClusters(ctx context.Context, c client.Client) []string {
	cfg := &unstructured.Unstructured{}
	cfg.SetAPIVersion("interoperator.services.openmcp.cloud/v1alpha1")
	cfg.SetKind("ProviderConfig")
	cfg.SetName("interoperator")
	patch := []byte(`{"spec":{"workloadClusters":{"labelSelector":{"matchLabels":{"validation.marketplane.io/offboarded":"true"}}}}}`)
	if err := c.Patch(ctx, cfg, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return []string{"select no workload Cluster in ProviderConfig interoperator: " + err.Error()}
	}
	return workloadRegistrations(ctx, c)
}

// waitNamespaceGone waits (up to 30 s) until the namespace name no longer
// exists on c.
func waitNamespaceGone(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: name}, ns)), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s (deleting: %t, finalizers %v): %w", name, !ns.DeletionTimestamp.IsZero(), ns.Spec.Finalizers, err)
	}
	return nil
}

// workloadRegistrations waits (up to 30 s) until the platform cluster has
// no SFCluster and no AccessRequest that the inter-operator registered for
// an openMCP workload Cluster, and returns those that remain (as last
// listed).
func workloadRegistrations(ctx context.Context, c client.Client) []string {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var now []string
		for _, l := range []struct {
			kind string
			list client.ObjectList
		}{{"SFCluster", &resourcev1alpha1.SFClusterList{}}, {"AccessRequest", &clustersv1alpha1.AccessRequestList{}}} {
			if err := c.List(ctx, l.list, client.HasLabels{clusters.LabelWorkloadClusterName}); err != nil {
				return false, nil // the next poll retries
			}
			items, err := apimeta.ExtractList(l.list)
			if err != nil {
				return false, err
			}
			for _, item := range items {
				if o, ok := item.(client.Object); ok {
					now = append(now, fmt.Sprintf("%s %s/%s (deleting: %t, finalizers %v)", l.kind, o.GetNamespace(), o.GetName(), !o.GetDeletionTimestamp().IsZero(), o.GetFinalizers()))
				}
			}
		}
		left = now
		return len(left) == 0, nil
	})
	if err != nil && left == nil {
		return []string{"the SFClusters and AccessRequests could not be listed: " + err.Error()}
	}
	return left
}
