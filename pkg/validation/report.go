package validation

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is the part of the seed's flow a step belongs to.
type Phase string

// The phases of the flow.
const (
	PhaseSetup    Phase = "SETUP"
	PhaseAssess   Phase = "ASSESS"
	PhaseTeardown Phase = "TEARDOWN"
)

// Result is how a step ended.
type Result string

// The results of a step.
const (
	ResultPassed  Result = "passed"
	ResultFailed  Result = "failed"
	ResultSkipped Result = "skipped"
)

// The steps of the flow, in order. Their IDs are stable: reports and tests
// name them.
const (
	StepSetup             = "setup"
	StepProviderInit      = "provider-init"
	StepProviderConfig    = "provider-config"
	StepProviderReady     = "provider-ready"
	StepControlPlane      = "control-plane"
	StepServiceReady      = "service-ready"
	StepDomainService     = "domain-service"
	StepCheck             = "check"
	StepServiceDelete     = "service-delete"
	StepDomainServiceGone = "domain-service-gone"
	StepControlPlaneGone  = "control-plane-delete"
	StepProviderDelete    = "provider-delete"
	StepTeardown          = "teardown"
)

// StepIDs lists the steps in the order Run takes them.
var StepIDs = []string{
	StepSetup, StepProviderInit, StepProviderConfig, StepProviderReady,
	StepControlPlane, StepServiceReady, StepDomainService, StepCheck,
	StepServiceDelete, StepDomainServiceGone, StepControlPlaneGone,
	StepProviderDelete, StepTeardown,
}

// Report is the outcome of one validation run.
type Report struct {
	// Provider is the ServiceProvider's name; Target names where the flow
	// ran ("in-process", "landscape <dir>", "clusters").
	Provider string `json:"provider"`
	Target   string `json:"target"`
	// Passed is true when no step failed.
	Passed   bool          `json:"passed"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"-"`
	// DurationSeconds is Duration, for JSON readers.
	DurationSeconds float64 `json:"durationSeconds"`
	Steps           []Step  `json:"steps"`
}

// Step is one step of a run.
type Step struct {
	// ID is one of StepIDs; Title says in words what the step did, e.g.
	// "ServiceProvider sample initialized".
	ID    string `json:"id"`
	Phase Phase  `json:"phase"`
	Title string `json:"title"`
	// WaitedFor names the condition the step waited on, e.g.
	// "ServiceProvider sample Initialized=True"; empty when it waited
	// on nothing.
	WaitedFor       string        `json:"waitedFor,omitempty"`
	Timeout         time.Duration `json:"-"`
	TimeoutSeconds  float64       `json:"timeoutSeconds,omitempty"`
	Duration        time.Duration `json:"-"`
	DurationSeconds float64       `json:"durationSeconds"`
	Result          Result        `json:"result"`
	// Message says why the step failed or was skipped, or adds a note
	// to a passed one (what a check printed, what was left by design).
	Message string   `json:"message,omitempty"`
	Failure *Failure `json:"failure,omitempty"`
}

// Failure is the evidence of a failed step.
type Failure struct {
	// Object names what the step waited on: "ServiceProvider sample",
	// "Sample tenant-a/demo on the onboarding cluster".
	Object string `json:"object,omitempty"`
	// Conditions are the object's last conditions.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Events are the object's last events, oldest first, each as
	// "Type Reason: message".
	Events []string `json:"events,omitempty"`
	// Logs are the tails of the provider's logs.
	Logs []LogTail `json:"logs,omitempty"`
}

// LogTail is the end of one log of the provider.
type LogTail struct {
	// Name says which log: a file path, or "pod/container".
	Name  string   `json:"name"`
	Lines []string `json:"lines"`
}
