package provider_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	apiinstall "github.com/marketplane/marketplane/api/install"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/provider"
)

// fakeDeployer is a deploy.Deployer of funcs; unset funcs fail the test.
type fakeDeployer struct {
	t      *testing.T
	InitFn func(context.Context, *deploy.Workload) (deploy.InitStatus, error)
}

func (f *fakeDeployer) Init(ctx context.Context, w *deploy.Workload) (deploy.InitStatus, error) {
	if f.InitFn == nil {
		f.t.Errorf("Init called for %s", w.Name)
		return deploy.InitStatus{}, nil
	}
	return f.InitFn(ctx, w)
}

func (f *fakeDeployer) Run(_ context.Context, w *deploy.Workload) (deploy.RunStatus, error) {
	f.t.Errorf("Run called for %s", w.Name)
	return deploy.RunStatus{}, nil
}

func (f *fakeDeployer) Remove(_ context.Context, w *deploy.Workload) (bool, error) {
	f.t.Errorf("Remove called for %s", w.Name)
	return true, nil
}

// TestReconcileInvalidSpec runs Reconcile on specs the API server would
// refuse (so they can only be stored with a fake client): the reconciler
// must report them on the conditions, deploy nothing, and ask for no
// retry.
func TestReconcileInvalidSpec(t *testing.T) {
	cases := map[string]struct {
		reason  string
		spec    func(*providerv1alpha1.DeploymentSpec)
		message string
	}{
		"DuplicateEnv": {
			reason: "Duplicate env names are ambiguous; the message names the variable.",
			spec: func(s *providerv1alpha1.DeploymentSpec) {
				s.Env = []providerv1alpha1.EnvVar{{Name: "FOO", Value: "1"}, {Name: "FOO", Value: "2"}}
			},
			message: "more than one variable named FOO",
		},
		"UnknownVerbosity": {
			reason:  "LOUD is not a contract verbosity.",
			spec:    func(s *providerv1alpha1.DeploymentSpec) { s.Verbosity = "LOUD" },
			message: `spec.verbosity "LOUD"`,
		},
	}
	scheme, err := apiinstall.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sp := serviceProvider("bad", tc.spec)
			sp.Generation = 3
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sp).WithStatusSubresource(sp).Build()
			r := provider.NewReconciler(c, &fakeDeployer{t: t}, provider.ServiceProviders())

			res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sp)})
			if err != nil {
				t.Errorf("%s\nReconcile: want no error (bad input is not retried), got %v", tc.reason, err)
			}
			if diff := cmp.Diff(ctrl.Result{}, res); diff != "" {
				t.Errorf("%s\nReconcile: want no requeue, -want +got:\n%s", tc.reason, diff)
			}
			got := &providerv1alpha1.ServiceProvider{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(sp), got); err != nil {
				t.Fatal(err)
			}
			for _, ct := range []providerv1alpha1.ConditionType{providerv1alpha1.ConditionReady, providerv1alpha1.ConditionInitialized} {
				cond := apimeta.FindStatusCondition(got.Status.Conditions, string(ct))
				if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(provider.ReasonInvalidSpec) || !strings.Contains(cond.Message, tc.message) {
					t.Errorf("%s\n%s condition = %+v, want False/InvalidSpec mentioning %q", tc.reason, ct, cond, tc.message)
				}
			}
			if got.Status.ObservedGeneration != 3 || got.Status.Phase != providerv1alpha1.PhaseProgressing {
				t.Errorf("%s\nobservedGeneration %d, phase %q; want 3, Progressing", tc.reason, got.Status.ObservedGeneration, got.Status.Phase)
			}
		})
	}
}
