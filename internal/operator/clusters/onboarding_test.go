package clusters

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

// TestOnboardingClientReused checks that the policy's onboarding client is
// made once per kubeconfig: the same one while the Secret is unchanged, a
// new one when it changes.
func TestOnboardingClientReused(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clustersv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kubeconfig := func(server string) []byte {
		return []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\n" +
			"users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n")
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "onboarding-kubeconfig", Namespace: "ms"},
		Data: map[string][]byte{KubeconfigSecretKey: kubeconfig("https://127.0.0.1:1")}}
	cluster := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "onboarding", Namespace: "ms",
			Annotations: map[string]string{KubeconfigSecretAnnotation: secret.Name}},
		Spec: clustersv1alpha1.ClusterSpec{Purposes: []string{clustersv1alpha1.PurposeOnboarding}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret, cluster).Build()
	source := OnboardingFromClusters(c, time.Second)

	get := func() client.Reader {
		t.Helper()
		r, err := source(t.Context())
		if err != nil || r == nil {
			t.Fatalf("onboarding source: %v, %v", r, err)
		}
		return r
	}
	first := get()
	if again := get(); again != first {
		t.Error("a second check with the same kubeconfig made a new client")
	}
	secret.Data[KubeconfigSecretKey] = kubeconfig("https://127.0.0.1:2")
	if err := c.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	if changed := get(); changed == first {
		t.Error("the kubeconfig changed but the old client was kept")
	}
}
