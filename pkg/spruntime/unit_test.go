package spruntime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
)

// fakeAPI is the smallest API implementation, for tests of the helpers.
type fakeAPI struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	conditions []metav1.Condition
	phase      Phase
	observed   int64
}

func (f *fakeAPI) DeepCopyObject() runtime.Object {
	c := *f
	f.DeepCopyInto(&c.ObjectMeta)
	c.conditions = append([]metav1.Condition(nil), f.conditions...)
	return &c
}
func (f *fakeAPI) GetConditions() *[]metav1.Condition { return &f.conditions }
func (f *fakeAPI) GetPhase() Phase                    { return f.phase }
func (f *fakeAPI) SetPhase(p Phase)                   { f.phase = p }
func (f *fakeAPI) SetObservedGeneration(g int64)      { f.observed = g }

// fakeConfig is a Config whose PollInterval dereferences a pointer, like
// openMCP's template did.
type fakeConfig struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	interval *time.Duration
}

func (f *fakeConfig) DeepCopyObject() runtime.Object { c := *f; return &c }
func (f *fakeConfig) PollInterval() time.Duration    { return *f.interval }

func TestPollInterval(t *testing.T) {
	minute, zero := time.Minute, time.Duration(0)
	cases := map[string]struct {
		reason      string
		annotations map[string]string
		cfg         Config
		want        time.Duration
		wantErr     bool
	}{
		"Default": {
			reason: "Without annotation and config interval the default applies.",
			cfg:    &fakeConfig{interval: &zero},
			want:   30 * time.Second,
		},
		"Config": {
			reason: "The ProviderConfig's interval wins over the default.",
			cfg:    &fakeConfig{interval: &minute},
			want:   time.Minute,
		},
		"Annotation": {
			reason:      "The annotation wins over the ProviderConfig.",
			annotations: map[string]string{PollIntervalAnnotation: "5m"},
			cfg:         &fakeConfig{interval: &minute},
			want:        5 * time.Minute,
		},
		"NilConfigPointer": {
			reason: "An unset pointer in the author's PollInterval gives the default, not a panic.",
			cfg:    &fakeConfig{},
			want:   30 * time.Second,
		},
		"NilConfig": {
			reason: "A nil config gives the default.",
			want:   30 * time.Second,
		},
		"BadAnnotation": {
			reason:      "An annotation that does not parse is reported and ignored.",
			annotations: map[string]string{PollIntervalAnnotation: "soon"},
			cfg:         &fakeConfig{interval: &minute},
			want:        time.Minute,
			wantErr:     true,
		},
		"NegativeAnnotation": {
			reason:      "A negative annotation is reported and ignored.",
			annotations: map[string]string{PollIntervalAnnotation: "-5s"},
			cfg:         &fakeConfig{interval: &zero},
			want:        30 * time.Second,
			wantErr:     true,
		},
		"BelowMinimum": {
			reason:      "Intervals below the minimum are raised to it.",
			annotations: map[string]string{PollIntervalAnnotation: "1ms"},
			cfg:         &fakeConfig{interval: &minute},
			want:        time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := pollInterval(tc.annotations, tc.cfg, 30*time.Second, time.Second)
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nerr = %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("%s\npollInterval() = %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
}

func TestJitter(t *testing.T) {
	cases := map[string]struct {
		reason   string
		d        time.Duration
		fraction float64
		rnd      float64
		want     time.Duration
	}{
		"Lowest":     {reason: "rnd 0 gives -fraction.", d: 100 * time.Second, fraction: 0.1, rnd: 0, want: 90 * time.Second},
		"Middle":     {reason: "rnd 0.5 gives d.", d: 100 * time.Second, fraction: 0.1, rnd: 0.5, want: 100 * time.Second},
		"High":       {reason: "rnd 0.75 gives +fraction/2.", d: 100 * time.Second, fraction: 0.1, rnd: 0.75, want: 105 * time.Second},
		"Disabled":   {reason: "fraction 0 disables jitter.", d: 100 * time.Second, fraction: 0, rnd: 0, want: 100 * time.Second},
		"Negative":   {reason: "a negative fraction disables jitter.", d: 100 * time.Second, fraction: -1, rnd: 0, want: 100 * time.Second},
		"Clamped":    {reason: "fractions of 1 and more are clamped below 1, keeping the result positive.", d: 100 * time.Second, fraction: 5, rnd: 0, want: time.Second},
		"ZeroPeriod": {reason: "zero stays zero.", d: 0, fraction: 0.1, rnd: 0, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := jitter(tc.d, tc.fraction, func() float64 { return tc.rnd })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\njitter(): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
	// With the real source, every result stays within the bounds.
	for range 1000 {
		if got := jitter(time.Minute, DefaultPollJitter, randFloat); got < 54*time.Second || got > 66*time.Second {
			t.Fatalf("jitter(1m, 10%%) = %s, outside [54s, 66s]", got)
		}
	}
}

func TestDeletionPolicy(t *testing.T) {
	cases := map[string]struct {
		value   *string
		want    DeletionPolicy
		wantErr bool
	}{
		"Absent": {want: DeletionPolicyDelete},
		"Empty":  {value: ptr(""), want: DeletionPolicyDelete},
		"Delete": {value: ptr("Delete"), want: DeletionPolicyDelete},
		"Orphan": {value: ptr("Orphan"), want: DeletionPolicyOrphan},
		// A typo must not fall back to Delete: that could destroy what
		// the user meant to keep.
		"Unknown": {value: ptr("orphan"), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := map[string]string{}
			if tc.value != nil {
				a[DeletionPolicyAnnotation] = *tc.value
			}
			got, err := deletionPolicy(a)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("deletionPolicy(%v) = %q, %v; want %q, error %v", a, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestOtherEnvironment(t *testing.T) {
	cases := map[string]struct {
		label, env string
		want       bool
	}{
		"SameEnvironment":        {label: "prod", env: "prod", want: false},
		"OtherEnvironment":       {label: "dev", env: "prod", want: true},
		"UnlabelledIsServed":     {label: "", env: "prod", want: false},
		"NoEnvironmentServesAll": {label: "dev", env: "", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			labels := map[string]string{}
			if tc.label != "" {
				labels[EnvironmentLabel] = tc.label
			}
			if got := otherEnvironment(labels, tc.env); got != tc.want {
				t.Errorf("otherEnvironment(%q, %q) = %v, want %v", tc.label, tc.env, got, tc.want)
			}
		})
	}
}

func TestReadyOwnedByRuntime(t *testing.T) {
	cases := map[string]struct {
		reason string
		setup  func(*fakeAPI)
		want   bool
	}{
		"NoReady": {reason: "An object without Ready has none of the author's.", setup: func(*fakeAPI) {}, want: true},
		"ConfigMissing": {reason: "A waiting reason is the runtime's.", want: true, setup: func(o *fakeAPI) {
			setReady(o, PhasePending, metav1.ConditionFalse, ReasonProviderConfigMissing, "")
		}},
		"AuthorReady": {reason: "StatusReady is the author's.", want: false, setup: func(o *fakeAPI) { StatusReady(o) }},
		"AuthorProgressing": {reason: "An author's Progressing reason is the author's.", want: false, setup: func(o *fakeAPI) {
			StatusProgressing(o, "WaitingForDeployment", "")
		}},
		"MirroredInvalidInput": {reason: "Failed mirroring Synced's invalid input is the runtime's.", want: true, setup: func(o *fakeAPI) {
			setReady(o, PhaseFailed, metav1.ConditionFalse, "BadVersion", "")
			setSynced(o, metav1.ConditionFalse, "BadVersion", "")
		}},
		"AuthorFailed": {reason: "Failed that Synced does not mirror is the author's.", want: false, setup: func(o *fakeAPI) {
			StatusFailed(o, "BackendDown", "")
			setSynced(o, metav1.ConditionTrue, ReasonReconcileSuccess, "")
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := &fakeAPI{}
			tc.setup(o)
			if got := readyOwnedByRuntime(o); got != tc.want {
				t.Errorf("%s\nreadyOwnedByRuntime() = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

func TestEventType(t *testing.T) {
	synced := func(s metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: ConditionSynced, Status: s, Reason: reason}}
	}
	cases := map[string]struct {
		c     metav1.Condition
		phase Phase
		all   []metav1.Condition
		want  string
	}{
		"SyncedTrue":         {c: metav1.Condition{Type: ConditionSynced, Status: metav1.ConditionTrue}, want: corev1.EventTypeNormal},
		"SyncedFalse":        {c: metav1.Condition{Type: ConditionSynced, Status: metav1.ConditionFalse, Reason: ReasonReconcileError}, want: corev1.EventTypeWarning},
		"Paused":             {c: metav1.Condition{Type: ConditionSynced, Status: metav1.ConditionFalse, Reason: ReasonPaused}, want: corev1.EventTypeNormal},
		"ReadyProgressing":   {c: metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse}, phase: PhaseProgressing, all: synced(metav1.ConditionTrue, ReasonReconcileSuccess), want: corev1.EventTypeNormal},
		"ReadyFailed":        {c: metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse}, phase: PhaseFailed, want: corev1.EventTypeWarning},
		"ReadyConfigMissing": {c: metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse}, phase: PhasePending, all: synced(metav1.ConditionFalse, ReasonProviderConfigMissing), want: corev1.EventTypeWarning},
		"DeletionBlocked":    {c: metav1.Condition{Type: ConditionDeletionBlocked, Status: metav1.ConditionTrue}, want: corev1.EventTypeWarning},
		"DeletionUnblocked":  {c: metav1.Condition{Type: ConditionDeletionBlocked, Status: metav1.ConditionFalse}, want: corev1.EventTypeNormal},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := eventType(tc.c, tc.phase, tc.all); got != tc.want {
				t.Errorf("eventType(%s=%s/%s) = %s, want %s", tc.c.Type, tc.c.Status, tc.c.Reason, got, tc.want)
			}
		})
	}
}

func TestSetConditionTruncatesMessages(t *testing.T) {
	o := &fakeAPI{}
	o.Generation = 3
	setSynced(o, metav1.ConditionFalse, ReasonReconcileError, strings.Repeat("x", 10*maxMessageLength))
	c := apimeta.FindStatusCondition(o.conditions, ConditionSynced)
	if c == nil || len(c.Message) != maxMessageLength || c.ObservedGeneration != 3 {
		t.Fatalf("condition = %+v, want a message of %d bytes and observedGeneration 3", c, maxMessageLength)
	}
}

func TestListNames(t *testing.T) {
	if got, want := listNames([]string{"a", "b"}, 3), "a, b"; got != want {
		t.Errorf("listNames = %q, want %q", got, want)
	}
	if got, want := listNames([]string{"a", "b", "c", "d"}, 2), "a, b and 2 more"; got != want {
		t.Errorf("listNames = %q, want %q", got, want)
	}
}

// nopReconciler satisfies Reconciler for the constructor test.
type nopReconciler struct{}

func (nopReconciler) CreateOrUpdate(_ context.Context, _ *fakeAPI, _ *fakeConfig, _ ClusterContext) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}
func (nopReconciler) Delete(_ context.Context, _ *fakeAPI, _ *fakeConfig, _ ClusterContext) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

func TestNewAPIReconcilerRejectsMissingArguments(t *testing.T) {
	newObj := func() *fakeAPI { return &fakeAPI{} }
	newCfg := func() *fakeConfig { return &fakeConfig{} }
	access := NewStaticAccess[*fakeAPI](ClusterContext{})
	cases := map[string]struct {
		build func() error
		want  []string
	}{
		"Everything": {
			build: func() error {
				_, err := NewAPIReconciler[*fakeAPI, *fakeConfig]("", nil, nil, nil, nil, nil)
				return err
			},
			want: []string{"provider name", "newObj", "newConfig", "Reconciler", "ClusterAccess", "platform cluster"},
		},
		"BadProviderName": {
			build: func() error {
				_, err := NewAPIReconciler("Not_A_Name", newObj, newCfg, nopReconciler{}, access, nil)
				return err
			},
			want: []string{`provider name "Not_A_Name"`, "platform cluster"},
		},
		"NilObject": {
			build: func() error {
				_, err := NewAPIReconciler("p", func() *fakeAPI { return nil }, newCfg, nopReconciler{}, access, nil)
				return err
			},
			want: []string{"newObj"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.build()
			if err == nil {
				t.Fatal("NewAPIReconciler() succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestInvalidUserInput(t *testing.T) {
	err := errors.Join(errors.New("other"), InvalidUserInput("", "version %s is unknown", "v9"))
	uerr, ok := AsInvalidUserInput(err)
	if !ok {
		t.Fatal("AsInvalidUserInput did not find the wrapped error")
	}
	if diff := cmp.Diff(&InvalidUserInputError{Reason: ReasonInvalidUserInput, Message: "version v9 is unknown"}, uerr); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }

func TestRecordTransitions(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: "m"}
	}
	ready := cond(ConditionReady, metav1.ConditionTrue, ReasonReconcileSuccess)
	synced := cond(ConditionSynced, metav1.ConditionTrue, ReasonReconcileSuccess)
	syncedErr := cond(ConditionSynced, metav1.ConditionFalse, ReasonReconcileError)
	failed := cond(ConditionReady, metav1.ConditionFalse, "BadInput")
	syncedBad := cond(ConditionSynced, metav1.ConditionFalse, "BadInput")
	progressing := cond(ConditionReady, metav1.ConditionFalse, ReasonReconciling)
	blocked := cond(ConditionDeletionBlocked, metav1.ConditionTrue, ReasonUserResourcesPresent)
	unblocked := cond(ConditionDeletionBlocked, metav1.ConditionFalse, ReasonDeletionUnblocked)
	cases := map[string]struct {
		reason      string
		before, now transition
		want        []string
	}{
		"FirstSuccess": {
			reason: "A first success (Ready and Synced turning True) is in the conditions; no event.",
			now:    transition{phase: PhaseReady, conditions: []metav1.Condition{ready, synced}},
		},
		"Progress": {
			reason: "Progress between normal states is no event.",
			before: transition{phase: PhaseProgressing, conditions: []metav1.Condition{progressing, synced}},
			now:    transition{phase: PhaseReady, conditions: []metav1.Condition{ready, synced}},
		},
		"Error": {
			reason: "A failed reconcile is a warning.",
			before: transition{phase: PhaseReady, conditions: []metav1.Condition{ready, synced}},
			now:    transition{phase: PhaseReady, conditions: []metav1.Condition{ready, syncedErr}},
			want:   []string{"Warning ReconcileError Synced=False: m"},
		},
		"Recovered": {
			reason: "The end of a warning is an event: the user who saw it looks for it.",
			before: transition{phase: PhaseReady, conditions: []metav1.Condition{ready, syncedErr}},
			now:    transition{phase: PhaseReady, conditions: []metav1.Condition{ready, synced}},
			want:   []string{"Normal ReconcileSuccess Synced=True: m"},
		},
		"InvalidInput": {
			reason: "Invalid input fails Ready and Synced: two warnings.",
			now:    transition{phase: PhaseFailed, conditions: []metav1.Condition{failed, syncedBad}},
			want:   []string{"Warning BadInput Ready=False: m", "Warning BadInput Synced=False: m"},
		},
		"FixedInput": {
			reason: "Fixed input ends both warnings; success later is no event of its own.",
			before: transition{phase: PhaseFailed, conditions: []metav1.Condition{failed, syncedBad}},
			now:    transition{phase: PhaseProgressing, conditions: []metav1.Condition{progressing, synced}},
			want:   []string{"Normal Reconciling Ready=False: m", "Normal ReconcileSuccess Synced=True: m"},
		},
		"Blocked": {
			reason: "Blocked deletion is a warning, its end an event.",
			before: transition{phase: PhaseTerminating, conditions: []metav1.Condition{blocked}},
			now:    transition{phase: PhaseTerminating, conditions: []metav1.Condition{unblocked}},
			want:   []string{"Normal NoUserResources DeletionBlocked=False: m"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			recordTransitions(rec, &fakeAPI{}, tc.before, tc.now)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nevents, -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
