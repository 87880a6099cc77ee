/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRetrievableOrAlias(t *testing.T) {
	yes, no := true, false
	type want struct {
		instances bool
		bindings  bool
	}
	tests := map[string]struct {
		reason string
		spec   SFServiceSpec
		want   want
	}{
		"NeitherSpelling": {
			reason: "Unset means not retrievable.",
			want:   want{},
		},
		"CurrentSpelling": {
			reason: "The current spelling is used as it is.",
			spec:   SFServiceSpec{InstancesRetrievable: true, BindingsRetrievable: true},
			want:   want{instances: true, bindings: true},
		},
		"OlderSpellingOnly": {
			reason: "The older spelling takes effect when the current one is unset.",
			spec:   SFServiceSpec{DeprecatedInstanceRetrievable: &yes, DeprecatedBindingRetrievable: &yes},
			want:   want{instances: true, bindings: true},
		},
		"OlderSpellingFalse": {
			reason: "An older spelling of false keeps the feature off.",
			spec:   SFServiceSpec{DeprecatedInstanceRetrievable: &no, DeprecatedBindingRetrievable: &no},
			want:   want{},
		},
		"CurrentSpellingWins": {
			reason: "When the current spelling is true it wins; the API server rejects a contradicting older spelling anyway.",
			spec:   SFServiceSpec{InstancesRetrievable: true, DeprecatedInstanceRetrievable: &no, BindingsRetrievable: true, DeprecatedBindingRetrievable: &no},
			want:   want{instances: true, bindings: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := want{instances: tc.spec.InstancesRetrievableOrAlias(), bindings: tc.spec.BindingsRetrievableOrAlias()}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRedirectURIOrAlias(t *testing.T) {
	tests := map[string]struct {
		reason string
		client *DashboardClient
		want   string
	}{
		"NoDashboardClient": {
			reason: "A service without a dashboard client has no redirect URI.",
			want:   "",
		},
		"CurrentSpelling": {
			reason: "redirectUri is used as it is.",
			client: &DashboardClient{RedirectURI: "https://a.example.com/"},
			want:   "https://a.example.com/",
		},
		"OlderSpellingOnly": {
			reason: "redirectURI takes effect when redirectUri is empty.",
			client: &DashboardClient{DeprecatedRedirectURI: "https://b.example.com/"},
			want:   "https://b.example.com/",
		},
		"BothSpellings": {
			reason: "redirectUri wins over redirectURI.",
			client: &DashboardClient{RedirectURI: "https://a.example.com/", DeprecatedRedirectURI: "https://b.example.com/"},
			want:   "https://a.example.com/",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.client.RedirectURIOrAlias(); got != tc.want {
				t.Errorf("%s\nRedirectURIOrAlias() = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestStateIsTerminal(t *testing.T) {
	tests := map[State]bool{
		StateInQueue:    false,
		StateUpdate:     false,
		StateDelete:     false,
		StateInProgress: false,
		StateSucceeded:  true,
		StateFailed:     true,
		"":              false,
	}
	for state, want := range tests {
		t.Run(string(state), func(t *testing.T) {
			if got := state.IsTerminal(); got != want {
				t.Errorf("State(%q).IsTerminal() = %v, want %v", state, got, want)
			}
		})
	}
}

func TestSFPlanTemplate(t *testing.T) {
	plan := &SFPlan{Spec: SFPlanSpec{Templates: []TemplateSpec{
		{Action: ActionProvision, Type: TypeHelm, URL: "https://charts.example.com/a.tgz"},
		{Action: ActionStatus, Type: TypeGoTemplate, Content: "first"},
		{Action: ActionStatus, Type: TypeGoTemplate, Content: "second"},
	}}}
	type want struct {
		Template TemplateSpec
		Found    bool
	}
	tests := map[string]struct {
		reason string
		action TemplateAction
		want   want
	}{
		"Present": {
			reason: "The template of the action is returned.",
			action: ActionProvision,
			want:   want{Template: plan.Spec.Templates[0], Found: true},
		},
		"FirstOfTwo": {
			reason: "When two templates name the action, the first is used, as in Service Fabrik.",
			action: ActionStatus,
			want:   want{Template: plan.Spec.Templates[1], Found: true},
		},
		"Absent": {
			reason: "A plan without the action reports that it has none.",
			action: ActionBind,
			want:   want{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got want
			got.Template, got.Found = plan.Template(tc.action)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nTemplate(%q): -want, +got:\n%s", tc.reason, tc.action, diff)
			}
		})
	}
}

func TestBindingInstanceNames(t *testing.T) {
	// The hex SHA-224 of "Odd ID/1" and of "db", the broker's names for
	// instances of these OSB ids when they are not DNS labels.
	const oddHash = "df7f52da6a38ce8634000f9e8a4aa45dfe5adc8f4a036de5b210f84d"
	tests := map[string]struct {
		reason string
		id     string
		want   []string
	}{
		"Name": {
			reason: "An id that is a name is looked up as it is first, then hashed.",
			id:     "db",
			want:   []string{"db", "a9759675c5b45fea42d2d43a1d29e47595c80667e98d6dbbb21bc24a"},
		},
		"NotAName": {
			reason: "An id no object can be named after (a slash, a space, capitals) is only hashed: a client refuses to send such a name.",
			id:     "Odd ID/1",
			want:   []string{oddHash},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := (&SFServiceBindingSpec{InstanceID: tc.id}).InstanceNames()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPlacedCluster(t *testing.T) {
	scheduled := func(status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: ConditionScheduled, Status: status, Reason: "Test"}}
	}
	tests := map[string]struct {
		reason string
		spec   SFServiceInstanceSpec
		status SFServiceInstanceStatus
		want   string
	}{
		"Unscheduled": {
			reason: "An instance that names no cluster is on none.",
			status: SFServiceInstanceStatus{Conditions: scheduled(metav1.ConditionTrue)},
		},
		"Pinned": {
			reason: "A clusterId its creator wrote, which nobody accepted, is no placement.",
			spec:   SFServiceInstanceSpec{ClusterID: "w1"},
		},
		"Refused": {
			reason: "A refused clusterId is no placement.",
			spec:   SFServiceInstanceSpec{ClusterID: "w1"},
			status: SFServiceInstanceStatus{Conditions: scheduled(metav1.ConditionFalse)},
		},
		"Recording": {
			reason: "A decision not yet recorded (Unknown) vouches for nothing.",
			spec:   SFServiceInstanceSpec{ClusterID: "w1"},
			status: SFServiceInstanceStatus{Conditions: scheduled(metav1.ConditionUnknown)},
		},
		"Accepted": {
			reason: "A True Scheduled condition places the instance on its clusterId.",
			spec:   SFServiceInstanceSpec{ClusterID: "w1"},
			status: SFServiceInstanceStatus{Conditions: scheduled(metav1.ConditionTrue)},
			want:   "w1",
		},
		"AppliedBefore": {
			reason: "An instance with applied objects and no condition (an earlier version placed it) is on its clusterId.",
			spec:   SFServiceInstanceSpec{ClusterID: "w1"},
			status: SFServiceInstanceStatus{Resources: []Source{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", Namespace: "b"}}},
			want:   "w1",
		},
		"AppliedSpecBefore": {
			reason: "So is one with an applied spec.",
			spec:   SFServiceInstanceSpec{ClusterID: "w1"},
			status: SFServiceInstanceStatus{AppliedSpec: &SFServiceInstanceSpec{ClusterID: "w1"}},
			want:   "w1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := &SFServiceInstance{Spec: tc.spec, Status: tc.status}
			if got := inst.PlacedCluster(); got != tc.want {
				t.Errorf("%s\nPlacedCluster() = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}
