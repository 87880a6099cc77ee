package sf

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/osb"
)

func TestParseOperation(t *testing.T) {
	tests := map[string]struct {
		reason string
		in     string
		want   Operation
		err    bool
	}{
		"Create":        {reason: "The first operation of an object.", in: "create-1", want: Operation{OpCreate, 1}},
		"Update":        {reason: "A later update.", in: "update-12", want: Operation{OpUpdate, 12}},
		"Delete":        {reason: "A deletion.", in: "delete-3", want: Operation{OpDelete, 3}},
		"UnknownType":   {reason: "Only the three kinds exist.", in: "bind-1", err: true},
		"NoSequence":    {reason: "The sequence is required.", in: "create-", err: true},
		"NoDash":        {reason: "Type and sequence are separated by a dash.", in: "create1", err: true},
		"Zero":          {reason: "Sequences start at 1.", in: "create-0", err: true},
		"LeadingZero":   {reason: "One spelling per operation, so that ids compare as strings.", in: "create-01", err: true},
		"Negative":      {reason: "No negative sequences.", in: "create--1", err: true},
		"Plus":          {reason: "No sign.", in: "create-+1", err: true},
		"Overflow":      {reason: "Out of range is not a crash.", in: "create-99999999999999999999", err: true},
		"ServiceFabrik": {reason: "Service Fabrik's base64 ids are not this broker's.", in: base64.StdEncoding.EncodeToString([]byte(`{"type":"create"}`)), err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseOperation(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nParseOperation(%q) error = %v, want error %v", tc.reason, tc.in, err, tc.err)
			}
			if err == nil {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
				}
				if got.String() != tc.in {
					t.Errorf("%s\nString() = %q, want %q", tc.reason, got.String(), tc.in)
				}
			}
		})
	}
}

func TestObjectName(t *testing.T) {
	long := strings.Repeat("a", 61)
	tests := map[string]struct {
		reason string
		id     string
		hashed bool
	}{
		"GUID":       {reason: "A lowercase GUID is its own name.", id: "7f3c2b1a-0e9d-4c8b-a7f6-e5d4c3b2a190"},
		"Uppercase":  {reason: "Uppercase is not a DNS label.", id: "7F3C2B1A-0E9D-4C8B-A7F6-E5D4C3B2A190", hashed: true},
		"Dots":       {reason: "Dots do not fit a namespace name.", id: "a.b", hashed: true},
		"TooLong":    {reason: "sf-<id> must fit 63 characters.", id: long, hashed: true},
		"Longest":    {reason: "60 characters still fit.", id: long[:60]},
		"Underscore": {reason: "Unreserved characters outside DNS labels are hashed.", id: "a_b", hashed: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ObjectName(tc.id)
			if (got != tc.id) != tc.hashed {
				t.Errorf("%s\nObjectName(%q) = %q, hashed = %v, want hashed %v", tc.reason, tc.id, got, got != tc.id, tc.hashed)
			}
			if ns := InstanceNamespace(tc.id); len(ns) > 63 {
				t.Errorf("%s\nnamespace %q is longer than 63 characters", tc.reason, ns)
			}
		})
	}
	if ObjectName("A") == ObjectName("B") {
		t.Error("different ids must get different hashed names")
	}
}

func TestInstanceProgress(t *testing.T) {
	now := metav1.NewTime(time.Now())
	type want struct {
		Op    string
		State string
		Usable,
		Repeatable *bool
		Gone bool
	}
	yes, no := true, false
	inst := func(op string, state osbv1alpha1.State, gen, observed int64, deleting bool, finalizers ...string) *osbv1alpha1.SFServiceInstance {
		i := &osbv1alpha1.SFServiceInstance{}
		i.Generation = gen
		i.Status.ObservedGeneration = observed
		i.Status.State = state
		i.Status.InstanceUsable, i.Status.UpdateRepeatable = "true", "false"
		if op != "" {
			i.Annotations = map[string]string{AnnotationOperation: op}
		}
		if deleting {
			i.DeletionTimestamp = &now
		}
		i.Finalizers = finalizers
		return i
	}
	tests := map[string]struct {
		reason string
		inst   *osbv1alpha1.SFServiceInstance
		want   want
	}{
		"Queued":          {reason: "A new instance is in progress.", inst: inst("create-1", osbv1alpha1.StateInQueue, 1, 0, false), want: want{Op: "create-1", State: osb.StateInProgress}},
		"EmptyState":      {reason: "No state yet is in progress.", inst: inst("create-1", "", 1, 0, false), want: want{Op: "create-1", State: osb.StateInProgress}},
		"Succeeded":       {reason: "The provisioner's terminal state counts.", inst: inst("create-1", osbv1alpha1.StateSucceeded, 1, 1, false), want: want{Op: "create-1", State: osb.StateSucceeded}},
		"StaleSucceeded":  {reason: "Succeeded for an older generation is not trusted.", inst: inst("update-2", osbv1alpha1.StateSucceeded, 2, 1, false), want: want{Op: "update-2", State: osb.StateInProgress}},
		"NoObservedGen":   {reason: "A provisioner that does not report the generation is trusted.", inst: inst("update-2", osbv1alpha1.StateSucceeded, 2, 0, false), want: want{Op: "update-2", State: osb.StateSucceeded}},
		"FailedUpdate":    {reason: "A failed update says whether the instance is usable and the update repeatable.", inst: inst("update-2", osbv1alpha1.StateFailed, 2, 2, false), want: want{Op: "update-2", State: osb.StateFailed, Usable: &yes, Repeatable: &no}},
		"FailedCreate":    {reason: "A failed create says neither.", inst: inst("create-1", osbv1alpha1.StateFailed, 1, 1, false), want: want{Op: "create-1", State: osb.StateFailed}},
		"Deleting":        {reason: "A deletion is in progress while the provisioner's finalizer is there.", inst: inst("create-1", osbv1alpha1.StateSucceeded, 2, 1, true, osbv1alpha1.FinalizerBroker, "osb.servicefabrik.io/finalizer"), want: want{Op: "delete-2", State: osb.StateInProgress}},
		"Tombstone":       {reason: "Only the broker's finalizer left: deleted.", inst: inst("delete-2", osbv1alpha1.StateDelete, 2, 1, true, osbv1alpha1.FinalizerBroker), want: want{Op: "delete-2", State: osb.StateSucceeded, Gone: true}},
		"DeleteFailed":    {reason: "A failed deletion says whether the instance is usable.", inst: inst("delete-2", osbv1alpha1.StateFailed, 2, 2, true, osbv1alpha1.FinalizerBroker, "x"), want: want{Op: "delete-2", State: osb.StateFailed, Usable: &yes}},
		"StaleDeleteFail": {reason: "A failure from before the deletion is not the deletion's.", inst: inst("delete-2", osbv1alpha1.StateFailed, 2, 1, true, osbv1alpha1.FinalizerBroker, "x"), want: want{Op: "delete-2", State: osb.StateInProgress}},
		"UnreportedFail":  {reason: "A failure without a generation on an object being deleted is the provision's, which the deletion left in the status.", inst: inst("create-1", osbv1alpha1.StateFailed, 2, 0, true, osbv1alpha1.FinalizerBroker, "x"), want: want{Op: "delete-2", State: osb.StateInProgress}},
		"ServiceFabrikObj": {reason: "Objects without the broker's annotation take the operation from the lastoperation label.", inst: func() *osbv1alpha1.SFServiceInstance {
			i := inst("", osbv1alpha1.StateUpdate, 1, 1, false)
			i.Labels = map[string]string{osbv1alpha1.LabelLastOperation: "update"}
			return i
		}(), want: want{Op: "update-1", State: osb.StateInProgress}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			op, p := instanceProgress(tc.inst)
			got := want{Op: op.String(), State: p.state, Usable: p.instanceUsable, Repeatable: p.updateRepeatable, Gone: p.gone}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// lastOperationResponse is the wire form of last_operation, encoded by
// encoding/json to check the hand-written encoder against.
type lastOperationResponse struct {
	State            string `json:"state"`
	Description      string `json:"description,omitempty"`
	InstanceUsable   *bool  `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool  `json:"update_repeatable,omitempty"`
}

func TestAppendLastOperation(t *testing.T) {
	yes, no := true, false
	descriptions := []string{"", "ready", `quote " and \ backslash`, "new\nline\ttab\rcr", "ctrl \x00\x01\x1f\x7f", "ünïcødé ✓ 🚀",
		"invalid \xff\xfe utf-8", "separators \u2028 \u2029", "<html> & stuff"}
	for _, d := range descriptions {
		for _, flags := range [][2]*bool{{nil, nil}, {&yes, &no}, {&no, nil}} {
			p := progress{state: osb.StateFailed, description: d, instanceUsable: flags[0], updateRepeatable: flags[1]}
			got := appendLastOperation(nil, p)
			want, err := json.Marshal(lastOperationResponse{State: p.state, Description: d, InstanceUsable: flags[0], UpdateRepeatable: flags[1]})
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("%q: invalid JSON %s: %v", d, got, err)
			}
			_ = json.Unmarshal(want, &w)
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("%q: -encoding/json, +hand-written:\n%s", d, diff)
			}
		}
	}
}
