package validation_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/validation"
)

// stepsOf maps each step of rep to its result and message.
func stepsOf(rep *validation.Report) map[string]validation.Step {
	out := map[string]validation.Step{}
	for _, s := range rep.Steps {
		out[s.ID] = s
	}
	return out
}

// TestFailedSetupSkipsChecksAndRunsCleanup: a setup that fails (here: the
// image is not mapped, found before any API server starts) skips every
// check, while the clean-up steps run and find nothing to delete.
func TestFailedSetupSkipsChecksAndRunsCleanup(t *testing.T) {
	spec, err := validation.SpecFromFiles("testdata/broken/probe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	rep := validation.Run(t.Context(), spec, providertest.InProcess(), validation.WithProgress(func(e validation.Event) {
		state := "start"
		if e.Done {
			state = string(e.Step.Result)
		}
		events = append(events, e.Step.ID+":"+state)
	}))
	if rep.Passed || rep.Provider != "probe" || rep.Target != "in-process" {
		t.Errorf("report: passed %v, provider %q, target %q", rep.Passed, rep.Provider, rep.Target)
	}
	if len(rep.Steps) != len(validation.StepIDs) {
		t.Fatalf("%d steps, want %d", len(rep.Steps), len(validation.StepIDs))
	}
	cleanup := map[string]bool{validation.StepServiceDelete: true, validation.StepControlPlaneGone: true, validation.StepProviderDelete: true, validation.StepTeardown: true}
	for i, s := range rep.Steps {
		if s.ID != validation.StepIDs[i] {
			t.Errorf("step %d is %s, want %s", i, s.ID, validation.StepIDs[i])
		}
		switch {
		case s.ID == validation.StepSetup:
			if s.Result != validation.ResultFailed || !strings.Contains(s.Message, `image "registry.invalid/validation/contractprobe:v1" is not mapped`) || !strings.Contains(s.Message, "Spec.Images") {
				t.Errorf("setup: %s %q, want failed naming the unmapped image and Spec.Images", s.Result, s.Message)
			}
		case s.ID == validation.StepTeardown:
			if s.Result != validation.ResultPassed {
				t.Errorf("teardown: %s %q, want passed", s.Result, s.Message)
			}
		case cleanup[s.ID]:
			if s.Result != validation.ResultSkipped || !strings.Contains(s.Message, "no ") || !strings.Contains(s.Message, "created") {
				t.Errorf("%s: %s %q, want skipped as nothing was created", s.ID, s.Result, s.Message)
			}
		default:
			if s.Result != validation.ResultSkipped || s.Message != "skipped: step setup failed" {
				t.Errorf("%s: %s %q, want skipped: step setup failed", s.ID, s.Result, s.Message)
			}
		}
	}
	if got := strings.Join(events, " "); !strings.HasPrefix(got, "setup:start setup:failed provider-init:skipped") || !strings.Contains(got, "teardown:start teardown:passed") {
		t.Errorf("progress events: %s", got)
	}
	if err := rep.Err(); err == nil || !strings.Contains(err.Error(), "step setup") {
		t.Errorf("Err() = %v, want the setup step", err)
	}
}

// TestCommandCheck: the command gets the kubeconfig variables, its output
// goes to Out, and a failure carries the output's tail.
func TestCommandCheck(t *testing.T) {
	env := validation.CheckEnv{Kubeconfigs: map[string]string{"platform": "/p", "onboarding": "/o", "workload": "/w", "mcp": "/m"}}
	var out bytes.Buffer
	env.Out = &out
	check := validation.CommandCheck(`echo "$KUBECONFIG $PLATFORM_KUBECONFIG $ONBOARDING_KUBECONFIG $WORKLOAD_KUBECONFIG $MCP_KUBECONFIG"`)
	if err := check(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "/m /p /o /w /m" {
		t.Errorf("output %q, want the MCP kubeconfig as KUBECONFIG and each cluster's", got)
	}

	delete(env.Kubeconfigs, "mcp")
	out.Reset()
	if err := validation.CommandCheck(`echo "$KUBECONFIG"`)(context.Background(), env); err != nil || strings.TrimSpace(out.String()) != "/o" {
		t.Errorf("without a control plane: %v, KUBECONFIG %q, want the onboarding kubeconfig", err, out.String())
	}

	err := validation.CommandCheck("echo first; echo no sampleobjects >&2; exit 3")(context.Background(), env)
	if err == nil || !strings.Contains(err.Error(), "exited with code 3") || !strings.Contains(err.Error(), "no sampleobjects") {
		t.Errorf("failing command: %v, want its exit code and output", err)
	}
}
