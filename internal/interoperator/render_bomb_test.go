package interoperator_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/internal/proctest"
)

// TestRenderBombStops is the second finding of issue #32 on real API
// servers: a plan whose provision template loops over an integer that the
// tenant's parameters set ({{ range .instance.spec.parameters.n }}), with
// n = 10^12. The instance fails with TemplateFailed naming the time limit,
// and the inter-operator (the reconcilers run in this process) is idle
// again within a second: before the guard in every loop, the render's
// goroutine went on spinning after the failure. A plan that loops over
// such a constant is refused before any render, naming the loop.
//
// The test does not run in parallel: it measures the process's CPU time.
func TestRenderBombStops(t *testing.T) {
	needsClusters(t)
	const limit = 500 * time.Millisecond
	e := newEnv(t, envOptions{configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.Limits.RenderTimeout = common.DurationOf(limit)
	}})
	e.createService(t, "svc")
	e.createPlan(t, "good", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("good"))})
	e.createPlan(t, "bomb", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, "{{- range .instance.spec.parameters.n }}{{- end }}")})
	e.createPlan(t, "literal", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, "{{- range 1000000000000 }}{{- end }}")})

	e.createPlan(t, "fails", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, `{{ fail "on purpose" }}`)})

	// A good instance and a failing one first, so that the controllers,
	// their clients and watches, and the recorder of warning events are
	// all running when the baseline is taken.
	e.createInstance(t, "good", "svc", "good", nil)
	e.createInstance(t, "fails", "svc", "fails", nil)
	e.waitInstance(t, "good", osbv1alpha1.StateSucceeded)
	e.waitFailed(t, "fails", provisioner.ReasonTemplateFailed, "on purpose")
	baseline := runtime.NumGoroutine()

	e.createInstance(t, "bomb", "svc", "bomb", map[string]any{"n": 1_000_000_000_000})
	e.waitFailed(t, "bomb", provisioner.ReasonTemplateFailed, "template exceeded its time limit ("+limit.String()+")")
	failed := proctest.Now(t, proctest.Process)
	cpu := proctest.CPUInWindow(t, failed, time.Second)
	if cpu > 200*time.Millisecond {
		t.Errorf("the inter-operator used %s of CPU in the second after the bomb failed, want less than 200ms: the render goes on", cpu)
	}
	// No goroutine executes a template any more, and the count of all is
	// back where it was.
	proctest.WaitNoGoroutines(t, "text/template.(*state)", pollTimeout)
	proctest.WaitGoroutines(t, baseline, pollTimeout)
	t.Logf("CPU in the second after the failure: %s; goroutines %d, %d before", cpu.Round(time.Millisecond), runtime.NumGoroutine(), baseline)

	// The literal bomb: the catalog finds the plan invalid, or (if the
	// instance comes first) the render refuses to parse it; either way the
	// error names the loop, and nothing runs.
	e.createInstance(t, "literal", "svc", "literal", nil)
	inst := e.waitInstance(t, "literal", osbv1alpha1.StateFailed)
	c := readyCondition(inst.Status.Conditions)
	if c == nil || c.Status != metav1.ConditionFalse || !containsReason([]provisioner.Reason{provisioner.ReasonPlanInvalid, provisioner.ReasonTemplateFailed}, c.Reason) {
		t.Errorf("Ready = %+v, want False with PlanInvalid or TemplateFailed", c)
	}
	if want := "range 1000000000000 repeats its body 1000000000000 times"; !strings.Contains(inst.Status.Error, want) {
		t.Errorf("error = %q, want it to mention %q", inst.Status.Error, want)
	}

	// Neither failure is retried.
	e.expectQuiet(t, "after the bombs failed")
}
