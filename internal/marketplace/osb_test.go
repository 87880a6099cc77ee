package marketplace

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
)

// TestOSBSettings: a ServiceProvider is served through OSB only with the
// annotation "true"; its binding rules are copied as given, and rules that
// cannot be read keep it out with a message instead of binding with other
// rights.
func TestOSBSettings(t *testing.T) {
	rules := `[{"apiGroups":["example.org"],"resources":["widgets"],"verbs":["get","list"]}]`
	cases := map[string]struct {
		reason      string
		annotations map[string]string
		want        *marketplacev1alpha1.OSBSettings
		wantMessage bool
	}{
		"NotOptedIn": {
			reason: "no annotation: not in the broker's catalog",
			want:   nil,
		},
		"OptedOut": {
			reason:      "any value but true is no opt-in",
			annotations: map[string]string{marketplacev1alpha1.AnnotationOSB: "yes", marketplacev1alpha1.AnnotationBindingRules: rules},
			want:        nil,
		},
		"NotBindable": {
			reason:      "opted in without binding rules",
			annotations: map[string]string{marketplacev1alpha1.AnnotationOSB: "true"},
			want:        &marketplacev1alpha1.OSBSettings{Enabled: true},
		},
		"Bindable": {
			reason:      "the rules are copied",
			annotations: map[string]string{marketplacev1alpha1.AnnotationOSB: "true", marketplacev1alpha1.AnnotationBindingRules: rules},
			want: &marketplacev1alpha1.OSBSettings{Enabled: true, BindingRules: []rbacv1.PolicyRule{{
				APIGroups: []string{"example.org"}, Resources: []string{"widgets"}, Verbs: []string{"get", "list"}}}},
		},
		"RulesNotJSON": {
			reason:      "unreadable rules disable OSB with a message",
			annotations: map[string]string{marketplacev1alpha1.AnnotationOSB: "true", marketplacev1alpha1.AnnotationBindingRules: `{"verbs":["*"]}`},
			wantMessage: true,
		},
		"UnknownField": {
			reason:      "a misspelt field is not silently dropped",
			annotations: map[string]string{marketplacev1alpha1.AnnotationOSB: "true", marketplacev1alpha1.AnnotationBindingRules: `[{"apiGroup":["x"],"resources":["y"],"verbs":["get"]}]`},
			wantMessage: true,
		},
		"NoVerbs": {
			reason:      "a rule without verbs is refused",
			annotations: map[string]string{marketplacev1alpha1.AnnotationOSB: "true", marketplacev1alpha1.AnnotationBindingRules: `[{"apiGroups":["x"],"resources":["y"]}]`},
			wantMessage: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := osbSettings(tc.annotations)
			if tc.wantMessage {
				if got == nil || got.Enabled || got.Message == "" || got.BindingRules != nil {
					t.Fatalf("%s: got %+v, want disabled with a message", tc.reason, got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
