package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/marketplane/marketplane/pkg/testenv"
	"github.com/marketplane/marketplane/pkg/validation"
)

const sampleImage = "registry.invalid/acme/sample:v1"

// fakeValidation replaces the spec reader and the run for one test: the
// spec holds a ServiceProvider with image (none when empty), and the run
// reports events to the progress callback and returns report. It records
// what the run got.
type fakeValidation struct {
	image  string
	events []validation.Event
	report *validation.Report

	ran   bool
	files []string
	spec  validation.Spec
}

func (f *fakeValidation) install(t *testing.T) {
	t.Helper()
	oldRun, oldSpec := runValidation, specFromFiles
	t.Cleanup(func() { runValidation, specFromFiles = oldRun, oldSpec })
	// The in-process target may set the variable; it is restored after.
	t.Setenv(testenv.AssetsEnv, os.Getenv(testenv.AssetsEnv))
	specFromFiles = func(files ...string) (validation.Spec, error) {
		f.files = files
		sp := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "openmcp.cloud/v1alpha1", "kind": "ServiceProvider",
			"metadata": map[string]any{"name": "sample"},
		}}
		if f.image != "" {
			_ = unstructured.SetNestedField(sp.Object, f.image, "spec", "image")
		}
		return validation.Spec{Provider: sp}, nil
	}
	runValidation = func(_ context.Context, spec validation.Spec, _ validation.Target, progress func(validation.Event), _ ...validation.Option) *validation.Report {
		f.ran, f.spec = true, spec
		for _, e := range f.events {
			progress(e)
		}
		return f.report
	}
}

// writeFile writes a file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestValidateRejectsBadFlags checks that bad or conflicting flags fail
// the command before the flow runs.
func TestValidateRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	manifest := writeFile(t, dir, "sp.yaml", "kind: ServiceProvider\n", 0o600)
	kubeconfig := writeFile(t, dir, "kubeconfig", "apiVersion: v1\nkind: Config\n", 0o600)
	binary := writeFile(t, dir, "provider", "#!/bin/sh\n", 0o755)
	missing := filepath.Join(dir, "nope.yaml")
	cases := map[string]struct {
		args    []string
		image   string
		wantErr string
	}{
		"no manifest":                       {args: nil, wantErr: "no manifests"},
		"unreadable manifest":               {args: []string{"-f", manifest, "-f", missing}, wantErr: missing},
		"landscape and kubeconfigs":         {args: []string{"-f", manifest, "--state-dir", dir, "--kubeconfig", kubeconfig, "--onboarding-kubeconfig", kubeconfig}, wantErr: "each select a target"},
		"platform kubeconfig alone":         {args: []string{"-f", manifest, "--kubeconfig", kubeconfig}, wantErr: "go together"},
		"unreadable kubeconfig":             {args: []string{"-f", manifest, "--kubeconfig", missing, "--onboarding-kubeconfig", kubeconfig}, wantErr: "--kubeconfig: open " + missing},
		"missing state directory":           {args: []string{"-f", manifest, "--state-dir", filepath.Join(dir, "state")}, wantErr: "no landscape state directory"},
		"binary on a landscape":             {args: []string{"-f", manifest, "--state-dir", dir, "--binary", binary}, wantErr: "for the in-process target"},
		"image map on clusters":             {args: []string{"-f", manifest, "--kubeconfig", kubeconfig, "--onboarding-kubeconfig", kubeconfig, "--image-map", sampleImage + "=" + binary}, wantErr: "operator pulls"},
		"bin dir on a landscape":            {args: []string{"-f", manifest, "--state-dir", dir, "--bin-dir", dir}, wantErr: "--bin-dir is for the in-process target"},
		"bad output":                        {args: []string{"-f", manifest, "--output", "yaml"}, wantErr: `--output "yaml"`},
		"zero timeout":                      {args: []string{"-f", manifest, "--timeout", "0s"}, wantErr: "--timeout 0s"},
		"junit in a missing directory":      {args: []string{"-f", manifest, "--junit", filepath.Join(dir, "no", "report.xml")}, wantErr: "--junit"},
		"image map without a binary":        {args: []string{"-f", manifest, "--image-map", sampleImage}, wantErr: "want IMAGE=BINARY"},
		"binary that does not exist":        {args: []string{"-f", manifest, "--binary", missing}, image: sampleImage, wantErr: "no such file"},
		"binary for a provider sans image":  {args: []string{"-f", manifest, "--binary", binary}, wantErr: "has no spec.image"},
		"provider image not mapped":         {args: []string{"-f", manifest}, image: sampleImage, wantErr: `image "registry.invalid/acme/sample:v1" is not mapped`},
		"bin dir without API server":        {args: []string{"-f", manifest, "--binary", binary, "--bin-dir", dir}, image: sampleImage, wantErr: "--bin-dir " + dir + ": no executable etcd"},
		"image mapped by --binary and -map": {args: []string{"-f", manifest, "--binary", binary, "--image-map", sampleImage + "=" + binary}, image: sampleImage, wantErr: "mapped twice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fake := &fakeValidation{image: tc.image, report: &validation.Report{Passed: true}}
			fake.install(t)
			var out, errOut bytes.Buffer
			cmd := NewRootCommand(&out)
			cmd.SetErr(&errOut)
			cmd.SetArgs(append([]string{"validate"}, tc.args...))
			err := cmd.ExecuteContext(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("validate %v = %v; want an error with %q", tc.args, err, tc.wantErr)
			}
			if fake.ran {
				t.Error("the flow ran although the flags were rejected")
			}
		})
	}
}

// progressEvents are a run's events: a passed step, a failed one with a
// message of two lines, and a skipped one that never started.
var progressEvents = []validation.Event{
	{Step: validation.Step{ID: validation.StepSetup, Title: "API servers started"}},
	{Step: validation.Step{ID: validation.StepSetup, Title: "API servers started", Duration: 1234 * time.Millisecond, Result: validation.ResultPassed}, Done: true},
	{Step: validation.Step{ID: validation.StepProviderInit, Title: "ServiceProvider sample initialized"}},
	{Step: validation.Step{ID: validation.StepProviderInit, Title: "ServiceProvider sample initialized", Duration: 3 * time.Minute,
		Result: validation.ResultFailed, Message: "InitFailed: init exited with code 1\ninit.log: ..."}, Done: true},
	{Step: validation.Step{ID: validation.StepProviderConfig, Result: validation.ResultSkipped, Message: "skipped: provider-init failed"}, Done: true},
}

const progressLines = "✓ API servers started (1.2s)\n" +
	"✗ ServiceProvider sample initialized (3m0s): InitFailed: init exited with code 1\n" +
	"- provider-config (skipped)\n"

func TestProgressPrinterPlain(t *testing.T) {
	var out testenv.SyncBuffer
	p := newProgressPrinter(&out, false)
	for _, e := range progressEvents {
		p.event(e)
	}
	p.close()
	if got := out.String(); got != progressLines {
		t.Errorf("plain progress:\n%q\nwant\n%q", got, progressLines)
	}
}

func TestProgressPrinterTerminal(t *testing.T) {
	var out testenv.SyncBuffer
	p := newProgressPrinter(&out, true)
	p.interval = time.Millisecond
	p.event(progressEvents[0])
	// The ticker redraws the line with the next spinner frames.
	redrawn := "\r\033[K" + spinnerFrames[2] + " API servers started ("
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), redrawn) {
		if time.Now().After(deadline) {
			t.Fatalf("the running step's line was not redrawn with %q within 10s:\n%q", redrawn, out.String())
		}
		time.Sleep(time.Millisecond)
	}
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	p.event(progressEvents[1])
	select {
	case <-done:
	default:
		t.Error("the ticker of the first step still runs after it ended")
	}
	for _, e := range progressEvents[2:] {
		p.event(e)
	}
	p.close()
	got := out.String()
	if !strings.HasPrefix(got, "\r\033[K"+spinnerFrames[0]+" API servers started (0s)") {
		t.Errorf("the first step's line does not start with its spinner:\n%q", got)
	}
	// The steps that started have their line replaced; the skipped one,
	// which never started, gets a line of its own.
	lines := strings.SplitAfter(progressLines, "\n")
	for _, line := range lines[:2] {
		if !strings.Contains(got, "\r\033[K"+line) {
			t.Errorf("the outcome %q does not replace the step's line:\n%q", line, got)
		}
	}
	if want := "\n" + lines[2]; !strings.HasSuffix(got, want) {
		t.Errorf("progress does not end with %q:\n%q", want, got)
	}
}

func passedRun() *validation.Report {
	return &validation.Report{
		Provider: "sample", Target: "in-process", Passed: true, Duration: 20 * time.Second,
		Steps: []validation.Step{
			{ID: validation.StepSetup, Phase: validation.PhaseSetup, Title: "API servers started", Duration: 8 * time.Second, Result: validation.ResultPassed},
			{ID: validation.StepTeardown, Phase: validation.PhaseTeardown, Title: "API servers stopped", Duration: time.Second, Result: validation.ResultPassed},
		},
	}
}

func failedRun() *validation.Report {
	return &validation.Report{
		Provider: "sample", Target: "in-process", Duration: 12 * time.Second,
		Steps: []validation.Step{
			{ID: validation.StepSetup, Phase: validation.PhaseSetup, Title: "API servers started", Duration: 8 * time.Second, Result: validation.ResultPassed},
			{ID: validation.StepProviderInit, Phase: validation.PhaseAssess, Title: "ServiceProvider sample initialized", Duration: 3 * time.Second,
				Result: validation.ResultFailed, Message: "InitFailed: init exited with code 1 <&>",
				Failure: &validation.Failure{Object: "ServiceProvider sample",
					Conditions: []metav1.Condition{{Type: "Initialized", Status: metav1.ConditionFalse, Reason: "InitFailed", Message: "init exited with code 1"}}}},
			{ID: validation.StepProviderConfig, Phase: validation.PhaseAssess, Title: "ProviderConfig applied", Result: validation.ResultSkipped},
		},
	}
}

// TestValidateWritesReport runs the command on canned reports: the
// provider's image is mapped to --binary, the report goes to stdout as a
// table or as JSON only, progress goes to stdout or stderr, the JUnit file
// is written, and a failed report fails the command.
func TestValidateWritesReport(t *testing.T) {
	cases := map[string]struct {
		report  *validation.Report
		output  string
		wantErr bool
		// wantOut are in stdout (text), wantErrOut in stderr.
		wantOut, wantErrOut []string
		junitFailures       int
	}{
		"text, passed": {
			report: passedRun(), output: "text",
			wantOut: []string{progressLines, "STEP      PHASE     RESULT  DURATION  NOTE\n", "passed in 20.0s\n"},
		},
		"text, failed": {
			report: failedRun(), output: "text", wantErr: true, junitFailures: 1,
			wantOut: []string{progressLines, "FAILED at step provider-init after 12.0s\n", "Object: ServiceProvider sample\n", "Initialized=False InitFailed"},
		},
		"json, failed": {
			report: failedRun(), output: "json", wantErr: true, junitFailures: 1,
			wantErrOut: []string{progressLines},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			manifest := writeFile(t, dir, "sp.yaml", "kind: ServiceProvider\n", 0o600)
			binary := writeFile(t, dir, "provider", "#!/bin/sh\n", 0o755)
			// The run is faked: the in-process target only needs to find
			// the two binaries it would start, so that no bin/ is needed.
			binDir := filepath.Join(dir, "bin")
			if err := os.Mkdir(binDir, 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, binDir, "etcd", "#!/bin/sh\n", 0o755)
			writeFile(t, binDir, "kube-apiserver", "#!/bin/sh\n", 0o755)
			junit := filepath.Join(dir, "report.xml")
			fake := &fakeValidation{image: sampleImage, events: progressEvents, report: tc.report}
			fake.install(t)
			var out, errOut bytes.Buffer
			cmd := NewRootCommand(&out)
			cmd.SetErr(&errOut)
			args := []string{"validate", "-f", manifest, "--binary", binary, "--bin-dir", binDir, "--output", tc.output, "--junit", junit, "--check", "true"}
			cmd.SetArgs(args)
			err := cmd.ExecuteContext(t.Context())

			if !fake.ran || len(fake.files) != 1 || fake.files[0] != manifest {
				t.Fatalf("the flow ran: %v, on files %v; want it to run on %s", fake.ran, fake.files, manifest)
			}
			if got := fake.spec.Images[sampleImage]; got != binary {
				t.Errorf("the run's image map = %v; want %s mapped to %s", fake.spec.Images, sampleImage, binary)
			}
			switch {
			case tc.wantErr && (!errors.Is(err, errValidationFailed) || !strings.Contains(err.Error(), validation.StepProviderInit)):
				t.Errorf("validate on a failed report = %v; want %v naming %s", err, errValidationFailed, validation.StepProviderInit)
			case !tc.wantErr && err != nil:
				t.Errorf("validate on a passed report = %v; want nil", err)
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, out.String())
				}
			}
			for _, want := range tc.wantErrOut {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
				}
			}
			if tc.output == "json" {
				var got validation.Report
				dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
				if err := dec.Decode(&got); err != nil {
					t.Fatalf("stdout is not a JSON report: %v\n%s", err, out.String())
				}
				if dec.More() || strings.TrimSpace(out.String()[dec.InputOffset():]) != "" {
					t.Errorf("stdout has more than the JSON report:\n%s", out.String())
				}
				if got.Provider != "sample" || got.Passed || len(got.Steps) != 3 || got.Steps[1].Result != validation.ResultFailed {
					t.Errorf("JSON report = %+v; want the failed report of sample", got)
				}
			}

			raw, err := os.ReadFile(junit)
			if err != nil {
				t.Fatalf("--junit: %v", err)
			}
			var suites struct {
				Suites []struct {
					Tests    int `xml:"tests,attr"`
					Failures int `xml:"failures,attr"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal(raw, &suites); err != nil {
				t.Fatalf("--junit wrote no XML: %v\n%s", err, raw)
			}
			if len(suites.Suites) != 1 || suites.Suites[0].Tests != len(tc.report.Steps) || suites.Suites[0].Failures != tc.junitFailures {
				t.Errorf("JUnit suites = %+v; want one with %d tests and %d failures", suites.Suites, len(tc.report.Steps), tc.junitFailures)
			}
		})
	}
}
