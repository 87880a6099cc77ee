package sisters

import (
	"slices"
	"testing"

	"k8s.io/utils/ptr"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
)

// TestDeploymentArgs checks the sister's run arguments: the contract
// flags with the master's environment (or the default), the platform as
// onboarding cluster, and leader election only with several replicas.
func TestDeploymentArgs(t *testing.T) {
	tests := map[string]struct {
		reason      string
		environment string
		replicas    *int32
		want        []string
	}{
		"Default": {reason: "One replica, no environment: the default, no leader election.",
			want: []string{"run", "--provider-name", ProviderName, "--environment", DefaultEnvironment, "--onboarding-is-platform"}},
		"Environment": {reason: "The master's environment, so that replicas labelled for it are served.", environment: "prod",
			want: []string{"run", "--provider-name", ProviderName, "--environment", "prod", "--onboarding-is-platform"}},
		"Replicas": {reason: "Several replicas elect a leader.", replicas: ptr.To[int32](3),
			want: []string{"run", "--provider-name", ProviderName, "--environment", DefaultEnvironment, "--onboarding-is-platform", "--leader-elect"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := spec{environment: tc.environment, namespace: "ns", catalog: "cat", master: "m",
				cfg: &interoperatorv1alpha1.ProviderConfig{Spec: interoperatorv1alpha1.ProviderConfigSpec{
					SisterProvisioner: &interoperatorv1alpha1.SisterProvisioner{Image: "img", Replicas: tc.replicas}}}}
			dep := s.deployment()
			if got := dep.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, tc.want) {
				t.Errorf("%s\nargs %v, want %v", tc.reason, got, tc.want)
			}
			if want := ptr.Deref(tc.replicas, 1); *dep.Spec.Replicas != want {
				t.Errorf("replicas %d, want %d", *dep.Spec.Replicas, want)
			}
		})
	}
}

// TestObjectsCarryTheMaster checks that every object installed on a
// sister carries the master's identity, and that the kubeconfig Secret is
// the only Secret the ServiceAccount may read.
func TestObjectsCarryTheMaster(t *testing.T) {
	s := spec{master: "uid-1", namespace: "ns", catalog: "cat",
		cfg: &interoperatorv1alpha1.ProviderConfig{Spec: interoperatorv1alpha1.ProviderConfigSpec{
			SisterProvisioner: &interoperatorv1alpha1.SisterProvisioner{Image: "img"}}}}
	for _, obj := range s.objects() {
		if !s.mine(obj) {
			t.Errorf("%T %s has labels %v, want the master's", obj, obj.GetName(), obj.GetLabels())
		}
		if (spec{master: "uid-2"}).mine(obj) {
			t.Errorf("%T %s counts as another master's", obj, obj.GetName())
		}
	}
}
