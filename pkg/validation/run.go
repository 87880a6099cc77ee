package validation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the field manager of the objects the flow applies.
const FieldOwner = "marketplane-validate"

// defaultLogLines is how many lines of each provider log a failure carries
// unless WithLogLines says otherwise.
const defaultLogLines = 20

// runner holds the state of one run.
type runner struct {
	spec   Spec
	target Target
	o      options
	// timeout bounds the waits of the current step.
	timeout time.Duration
	cl      *Clusters
	// tmp holds the tenant's kubeconfig file.
	tmp string

	provider, image string
	// sp is the ServiceProvider as last read.
	sp        *unstructured.Unstructured
	spApplied bool
	// resources is the ServiceProvider's status.resources.
	resources []schema.GroupVersionKind

	// platformObjs were applied to the platform cluster; services are the
	// objects for the onboarding cluster, servicesApplied those applied.
	platformObjs, services, servicesApplied []*unstructured.Unstructured
	// createdNamespaces are the namespaces the flow created, by cluster.
	createdNamespaces map[string][]string

	cpObj     *unstructured.Unstructured
	cpApplied bool
	cp        *ControlPlaneAccess
	// cpKind names the control plane's kind for messages.
	cpKind string

	// snapshots of CRDs and namespaces before the services were applied,
	// and what was new after they became Ready, by cluster ("mcp",
	// "workload"); domainClients reach those clusters.
	before, added map[string]*snapshot
	domainClients map[string]client.Client
}

// stepDef is one step of the flow.
type stepDef struct {
	id    string
	phase Phase
	// cleanup steps run after a failure, too.
	cleanup bool
	run     func(ctx context.Context, s *Step) error
}

func (r *runner) steps() []stepDef {
	return []stepDef{
		{StepSetup, PhaseSetup, false, r.setup},
		{StepProviderInit, PhaseAssess, false, r.providerInit},
		{StepProviderConfig, PhaseAssess, false, r.providerConfig},
		{StepProviderReady, PhaseAssess, false, r.providerReady},
		{StepControlPlane, PhaseAssess, false, r.controlPlane},
		{StepServiceReady, PhaseAssess, false, r.serviceReady},
		{StepDomainService, PhaseAssess, false, r.domainService},
		{StepCheck, PhaseAssess, false, r.check},
		{StepServiceDelete, PhaseAssess, true, r.serviceDelete},
		{StepDomainServiceGone, PhaseAssess, false, r.domainServiceGone},
		{StepControlPlaneGone, PhaseTeardown, true, r.controlPlaneDelete},
		{StepProviderDelete, PhaseTeardown, true, r.providerDelete},
		{StepTeardown, PhaseTeardown, true, r.teardown},
	}
}

// Run validates spec on target and returns the report; it never returns
// nil. The steps run in the order of StepIDs; after the first failed step
// the remaining checks are skipped while the clean-up steps
// (service-delete, control-plane-delete, provider-delete, teardown) still
// run, best effort, on a context that ctx's cancellation does not end
// (each of their waits is bounded by the step timeout). The report's
// first failed step is the cause.
func Run(ctx context.Context, spec Spec, target Target, opts ...Option) *Report {
	o := options{timeout: DefaultTimeout, logLines: defaultLogLines}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logLines <= 0 {
		o.logLines = defaultLogLines
	}
	r := &runner{spec: spec, target: target, o: o, createdNamespaces: map[string][]string{}}
	rep := &Report{Started: time.Now()}
	if target != nil {
		rep.Target = target.Name()
	}
	if spec.Provider != nil {
		r.provider = spec.Provider.GetName()
		r.image, _, _ = unstructuredString(spec.Provider, "spec", "image")
		rep.Provider = r.provider
	}
	failed := ""
	for _, d := range r.steps() {
		s := Step{ID: d.id, Phase: d.phase}
		if failed != "" && !d.cleanup {
			s.Result, s.Message = ResultSkipped, "skipped: step "+failed+" failed"
			rep.Steps = append(rep.Steps, s)
			r.progress(s, true)
			continue
		}
		stepCtx := ctx
		if d.cleanup {
			stepCtx = context.WithoutCancel(ctx)
		}
		r.timeout = o.timeoutOf(d.id)
		r.progress(s, false)
		begin := time.Now()
		err := runStep(stepCtx, d, &s)
		s.Duration = time.Since(begin)
		s.DurationSeconds = s.Duration.Seconds()
		s.TimeoutSeconds = s.Timeout.Seconds()
		switch {
		case err != nil:
			s.Result, s.Message = ResultFailed, err.Error()
			if ctx.Err() != nil && !d.cleanup {
				// SIGINT or SIGTERM to `marketplane validate`, or the
				// caller's context: say so rather than what it broke.
				s.Message = "interrupted (" + context.Cause(ctx).Error() + "): " + s.Message
			}
			// A step that waited in vain often waited for a request the
			// operator refused: name it, with the rule.
			if denied := r.deniedRequests(ctx); denied != "" && !d.cleanup && !strings.Contains(s.Message, denied) {
				s.Message += "; the operator denied the provider's requests: " + denied
			}
			var sf *stepFailure
			if errors.As(err, &sf) {
				s.Failure = sf.failure
			}
			if failed == "" {
				failed = d.id
			}
		case s.Result == "":
			s.Result = ResultPassed
		}
		rep.Steps = append(rep.Steps, s)
		r.progress(s, true)
	}
	rep.Passed = failed == ""
	rep.Duration = time.Since(rep.Started)
	rep.DurationSeconds = rep.Duration.Seconds()
	return rep
}

// runStep runs d, turning a panic into the step's failure so that the
// clean-up steps still run.
func runStep(ctx context.Context, d stepDef, s *Step) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("step %s panicked: %v", d.id, p)
		}
	}()
	return d.run(ctx, s)
}

// progress reports a step's start or end to WithProgress's function.
func (r *runner) progress(s Step, done bool) {
	if r.o.progress != nil {
		r.o.progress(Event{Step: s, Done: done})
	}
}

// skip marks s skipped with a note; the step function then returns nil.
func skip(s *Step, format string, args ...any) error {
	s.Result, s.Message = ResultSkipped, fmt.Sprintf(format, args...)
	return nil
}

// Validate runs the flow in a test: it logs each step as it ends and the
// report's table, and fails the test with the failed step, its message
// and its evidence when the run did not pass. opts come after Validate's
// own progress logging, so WithProgress replaces it.
func Validate(tb testing.TB, spec Spec, target Target, opts ...Option) *Report {
	tb.Helper()
	logProgress := WithProgress(func(e Event) {
		if e.Done {
			tb.Logf("validation: step %s %s (%s)%s", e.Step.ID, e.Step.Result, e.Step.Duration.Round(100*time.Millisecond), noteOf(e.Step))
		}
	})
	rep := Run(tb.Context(), spec, target, append([]Option{logProgress}, opts...)...)
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		tb.Errorf("validation: %v", err)
	}
	tb.Logf("validation of %s on %s:\n%s", rep.Provider, rep.Target, table.String())
	if !rep.Passed {
		tb.Fatalf("%v\n%s", rep.Err(), rep.FailureText())
	}
	return rep
}

// noteOf is the first line of a step's message, for progress lines.
func noteOf(s Step) string {
	if s.Message == "" {
		return ""
	}
	line, _, _ := strings.Cut(s.Message, "\n")
	return ": " + line
}

// teardown stops the target and removes the run's files.
func (r *runner) teardown(ctx context.Context, s *Step) error {
	if r.tmp != "" {
		defer os.RemoveAll(r.tmp)
	}
	if r.target == nil {
		return skip(s, "no target")
	}
	s.Title = "target left running"
	if _, ok := r.target.(OwningTarget); ok {
		s.Title = r.target.Name() + " landscape stopped"
	}
	if err := r.target.Stop(ctx); err != nil {
		return fmt.Errorf("stop %s: %w", r.target.Name(), err)
	}
	return nil
}
