package broker

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
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

func TestParseAPIVersion(t *testing.T) {
	tests := map[string]struct {
		in   string
		want APIVersion
		err  bool
	}{
		"Current":  {in: "2.17", want: APIVersion{2, 17}},
		"Old":      {in: "2.13", want: APIVersion{2, 13}},
		"Next":     {in: "3.0", want: APIVersion{3, 0}},
		"Patch":    {in: "2.17.1", err: true},
		"Empty":    {in: "", err: true},
		"Letters":  {in: "two.seventeen", err: true},
		"Negative": {in: "-2.17", err: true},
		"Spaces":   {in: " 2.17", err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseAPIVersion(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("ParseAPIVersion(%q) error = %v, want error %v", tc.in, err, tc.err)
			}
			if err == nil && got != tc.want {
				t.Errorf("ParseAPIVersion(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
	if !(APIVersion{2, 10}).Less(DefaultMinAPIVersion) || (APIVersion{2, 11}).Less(DefaultMinAPIVersion) || (APIVersion{2, 17}).Less(DefaultMinAPIVersion) {
		t.Error("2.10 must be older, 2.11 and 2.17 not older than the default minimum")
	}
}

func TestParseOriginatingIdentity(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := map[string]struct {
		reason string
		in     string
		want   string
		err    bool
	}{
		"CloudFoundry": {reason: "The spec's example.", in: "cloudfoundry " + b64("{\n  \"user_id\": \"683ea748\"\n}"), want: `cloudfoundry {"user_id":"683ea748"}`},
		"Unpadded":     {reason: "Unpadded base64 is accepted too.", in: "kubernetes " + base64.RawStdEncoding.EncodeToString([]byte(`{"username":"a"}`)), want: `kubernetes {"username":"a"}`},
		"NoValue":      {reason: "Both parts are required.", in: "cloudfoundry", err: true},
		"NoPlatform":   {reason: "The platform must not be empty.", in: " " + b64(`{}`), err: true},
		"NotBase64":    {reason: "The value is base64.", in: "cloudfoundry !!!", err: true},
		"NotJSON":      {reason: "The value is JSON.", in: "cloudfoundry " + b64("user"), err: true},
		"NotObject":    {reason: "The value is a JSON object.", in: "cloudfoundry " + b64(`["a"]`), err: true},
		"TooLarge":     {reason: "Identities are bounded.", in: "cloudfoundry " + b64(`{"a":"`+strings.Repeat("x", maxIdentityBytes)+`"}`), err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseOriginatingIdentity(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nerror = %v, want error %v", tc.reason, err, tc.err)
			}
			if err == nil && got.annotation() != tc.want {
				t.Errorf("%s\nannotation = %q, want %q", tc.reason, got.annotation(), tc.want)
			}
		})
	}
}

func TestMergePatch(t *testing.T) {
	tests := map[string]struct {
		reason      string
		base, patch string
		want        string
	}{
		"AddKey":        {reason: "New keys are added, others stay.", base: `{"a":1}`, patch: `{"b":2}`, want: `{"a":1,"b":2}`},
		"ReplaceKey":    {reason: "Given keys are replaced.", base: `{"a":1,"b":2}`, patch: `{"a":3}`, want: `{"a":3,"b":2}`},
		"RemoveKey":     {reason: "null removes a key.", base: `{"a":1,"b":2}`, patch: `{"a":null}`, want: `{"b":2}`},
		"Nested":        {reason: "Objects merge recursively.", base: `{"o":{"x":1,"y":2}}`, patch: `{"o":{"y":3}}`, want: `{"o":{"x":1,"y":3}}`},
		"ArrayReplaced": {reason: "Arrays are replaced whole.", base: `{"l":[1,2]}`, patch: `{"l":[3]}`, want: `{"l":[3]}`},
		"NoBase":        {reason: "An instance without parameters gets the patch.", base: ``, patch: `{"a":1}`, want: `{"a":1}`},
		"BigInteger":    {reason: "Large integers are not rounded.", base: `{}`, patch: `{"n":12345678901234567890}`, want: `{"n":12345678901234567890}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := mergePatch([]byte(tc.base), []byte(tc.patch))
			if err != nil {
				t.Fatalf("%s\nmergePatch: %v", tc.reason, err)
			}
			if !sameObject(got, []byte(tc.want)) || string(got) != tc.want {
				t.Errorf("%s\nmergePatch(%s, %s) = %s, want %s", tc.reason, tc.base, tc.patch, got, tc.want)
			}
		})
	}
}

func TestObjectField(t *testing.T) {
	deep := strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1)
	tests := map[string]struct {
		reason string
		in     string
		want   string
		err    bool
	}{
		"Absent":       {reason: "Absent is nil.", in: ``},
		"Null":         {reason: "null is absent.", in: `null`},
		"Object":       {reason: "Objects are compacted.", in: `{ "a" : 1 }`, want: `{"a":1}`},
		"Array":        {reason: "Only objects.", in: `[1]`, err: true},
		"String":       {reason: "Only objects.", in: `"a"`, err: true},
		"TooDeep":      {reason: "Nesting is bounded.", in: deep, err: true},
		"BracesInText": {reason: "Brackets in strings do not count.", in: `{"a":"` + strings.Repeat("{", 100) + `"}`, want: `{"a":"` + strings.Repeat("{", 100) + `"}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := objectField([]byte(tc.in), "parameters")
			if (err != nil) != tc.err {
				t.Fatalf("%s\nerror = %v, want error %v", tc.reason, err, tc.err)
			}
			if string(got) != tc.want {
				t.Errorf("%s\ngot %s, want %s", tc.reason, got, tc.want)
			}
		})
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
		"Queued":          {reason: "A new instance is in progress.", inst: inst("create-1", osbv1alpha1.StateInQueue, 1, 0, false), want: want{Op: "create-1", State: stateInProgress}},
		"EmptyState":      {reason: "No state yet is in progress.", inst: inst("create-1", "", 1, 0, false), want: want{Op: "create-1", State: stateInProgress}},
		"Succeeded":       {reason: "The provisioner's terminal state counts.", inst: inst("create-1", osbv1alpha1.StateSucceeded, 1, 1, false), want: want{Op: "create-1", State: stateSucceeded}},
		"StaleSucceeded":  {reason: "Succeeded for an older generation is not trusted.", inst: inst("update-2", osbv1alpha1.StateSucceeded, 2, 1, false), want: want{Op: "update-2", State: stateInProgress}},
		"NoObservedGen":   {reason: "A provisioner that does not report the generation is trusted.", inst: inst("update-2", osbv1alpha1.StateSucceeded, 2, 0, false), want: want{Op: "update-2", State: stateSucceeded}},
		"FailedUpdate":    {reason: "A failed update says whether the instance is usable and the update repeatable.", inst: inst("update-2", osbv1alpha1.StateFailed, 2, 2, false), want: want{Op: "update-2", State: stateFailed, Usable: &yes, Repeatable: &no}},
		"FailedCreate":    {reason: "A failed create says neither.", inst: inst("create-1", osbv1alpha1.StateFailed, 1, 1, false), want: want{Op: "create-1", State: stateFailed}},
		"Deleting":        {reason: "A deletion is in progress while the provisioner's finalizer is there.", inst: inst("create-1", osbv1alpha1.StateSucceeded, 2, 1, true, osbv1alpha1.FinalizerBroker, "osb.servicefabrik.io/finalizer"), want: want{Op: "delete-2", State: stateInProgress}},
		"Tombstone":       {reason: "Only the broker's finalizer left: deleted.", inst: inst("delete-2", osbv1alpha1.StateDelete, 2, 1, true, osbv1alpha1.FinalizerBroker), want: want{Op: "delete-2", State: stateSucceeded, Gone: true}},
		"DeleteFailed":    {reason: "A failed deletion says whether the instance is usable.", inst: inst("delete-2", osbv1alpha1.StateFailed, 2, 2, true, osbv1alpha1.FinalizerBroker, "x"), want: want{Op: "delete-2", State: stateFailed, Usable: &yes}},
		"StaleDeleteFail": {reason: "A failure from before the deletion is not the deletion's.", inst: inst("delete-2", osbv1alpha1.StateFailed, 2, 1, true, osbv1alpha1.FinalizerBroker, "x"), want: want{Op: "delete-2", State: stateInProgress}},
		"ServiceFabrikObj": {reason: "Objects without the broker's annotation take the operation from the lastoperation label.", inst: func() *osbv1alpha1.SFServiceInstance {
			i := inst("", osbv1alpha1.StateUpdate, 1, 1, false)
			i.Labels = map[string]string{osbv1alpha1.LabelLastOperation: "update"}
			return i
		}(), want: want{Op: "update-1", State: stateInProgress}},
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
			p := progress{state: stateFailed, description: d, instanceUsable: flags[0], updateRepeatable: flags[1]}
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
