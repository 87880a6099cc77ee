package provider

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

func TestValidate(t *testing.T) {
	valid := func() providerv1alpha1.DeploymentSpec {
		return providerv1alpha1.DeploymentSpec{Image: "example:v1", Verbosity: providerv1alpha1.VerbosityInfo}
	}
	cases := map[string]struct {
		reason string
		spec   func(*providerv1alpha1.DeploymentSpec)
		want   []string // substrings of the problems; none means valid
	}{
		"Valid": {
			reason: "The seed-04 spec is valid.",
			spec:   func(*providerv1alpha1.DeploymentSpec) {},
		},
		"LowerCaseVerbosity": {
			reason: "The CRD accepts openMCP's lower-case spellings.",
			spec:   func(s *providerv1alpha1.DeploymentSpec) { s.Verbosity = "debug" },
		},
		"UnsetVerbosity": {
			reason: "An unset verbosity means INFO.",
			spec:   func(s *providerv1alpha1.DeploymentSpec) { s.Verbosity = "" },
		},
		"UnknownVerbosity": {
			reason: "The CRD rejects LOUD, but the reconciler must not pass it on either.",
			spec:   func(s *providerv1alpha1.DeploymentSpec) { s.Verbosity = "LOUD" },
			want:   []string{`spec.verbosity "LOUD"`},
		},
		"DuplicateEnv": {
			reason: "Two variables of one name are ambiguous; the message names the variable, once.",
			spec: func(s *providerv1alpha1.DeploymentSpec) {
				s.Env = []providerv1alpha1.EnvVar{{Name: "A", Value: "1"}, {Name: "FOO", Value: "1"}, {Name: "FOO", Value: "2"}, {Name: "FOO", Value: "3"}}
			},
			want: []string{"more than one variable named FOO"},
		},
		"ShadowsPodName": {
			reason: "POD_* variables are the contract's; spec.env may not replace them.",
			spec: func(s *providerv1alpha1.DeploymentSpec) {
				s.Env = []providerv1alpha1.EnvVar{{Name: "POD_NAMESPACE", Value: "x"}}
			},
			want: []string{"spec.env sets POD_NAMESPACE"},
		},
		"EmptyImage": {
			reason: "Without an image there is nothing to run.",
			spec:   func(s *providerv1alpha1.DeploymentSpec) { s.Image = " " },
			want:   []string{"spec.image is empty"},
		},
		"Several": {
			reason: "All problems are reported at once.",
			spec: func(s *providerv1alpha1.DeploymentSpec) {
				s.Verbosity = "LOUD"
				s.Env = []providerv1alpha1.EnvVar{{Name: "X"}, {Name: "X"}}
			},
			want: []string{"LOUD", "named X"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := valid()
			tc.spec(&spec)
			got := validate(&spec)
			if len(tc.want) == 0 && got != "" {
				t.Errorf("%s\nvalidate: want no problems, got %q", tc.reason, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s\nvalidate: want a problem containing %q, got %q", tc.reason, w, got)
				}
			}
			if n := strings.Count(got, "named FOO"); n > 1 {
				t.Errorf("%s\nvalidate: FOO reported %d times: %q", tc.reason, n, got)
			}
		})
	}
}

func TestRunArgs(t *testing.T) {
	cases := map[string]struct {
		reason   string
		replicas int32
		metrics  deploy.Metrics
		want     []string
	}{
		"Single": {
			reason:   "One replica without metrics needs no run arguments.",
			replicas: 1,
		},
		"HA": {
			reason:   "More than one replica must elect a leader.",
			replicas: 2,
			want:     []string{"--leader-elect=true"},
		},
		"Metrics": {
			reason:   "Metrics on bind the configured port.",
			replicas: 1,
			metrics:  deploy.Metrics{Enabled: true, Port: 9090},
			want:     []string{"--metrics-bind-address=:9090"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, runArgs(tc.replicas, tc.metrics)); diff != "" {
				t.Errorf("%s\nrunArgs: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
