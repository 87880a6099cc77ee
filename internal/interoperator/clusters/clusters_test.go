package clusters

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := resourcev1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func sfcluster(name string) *resourcev1alpha1.SFCluster {
	return &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "cat", Name: name},
		Spec: resourcev1alpha1.SFClusterSpec{SecretRef: name + "-kubeconfig"}}
}

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://api.example.com
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: not-a-real-token
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func TestRegistry(t *testing.T) {
	ctx := context.Background()
	secret := func(name, data string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cat", Name: name + "-kubeconfig"},
			Data: map[string][]byte{resourcev1alpha1.KubeconfigSecretKey: []byte(data)}}
	}
	execConfig := strings.Replace(testKubeconfig, "    token: not-a-real-token\n", "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/steal}\n", 1)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(
		sfcluster("good"), secret("good", testKubeconfig),
		sfcluster("exec"), secret("exec", execConfig),
		sfcluster("garbage"), secret("garbage", "not: [a kubeconfig"),
		sfcluster("nosecret"),
	).Build()
	now := time.Now()
	r := NewRegistry(c, c, testScheme(t), WithRefreshInterval(time.Minute))
	r.now = func() time.Time { return now }

	tgt, err := r.Target(ctx, "cat", "good")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "good", "server": "https://api.example.com", "caData": ""}
	got := tgt.Variable()
	for k, v := range want {
		if got[k] != v {
			t.Errorf(".cluster.%s = %v, want %v", k, got[k], v)
		}
	}
	if strings.Contains(strings.Join([]string{got["name"].(string), got["server"].(string), got["caData"].(string)}, ""), "not-a-real-token") {
		t.Error(".cluster holds the credentials")
	}
	if again, _ := r.Target(ctx, "cat", "good"); again != tgt {
		t.Error("a second Target within the refresh interval built a new client")
	}
	now = now.Add(2 * time.Minute)
	if again, _ := r.Target(ctx, "cat", "good"); again != tgt {
		t.Error("after the refresh interval, an unchanged Secret built a new client")
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "cat", Name: "good-kubeconfig"}, s); err != nil {
		t.Fatal(err)
	}
	s.Data[resourcev1alpha1.KubeconfigSecretKey] = []byte(strings.Replace(testKubeconfig, "api.example.com", "api2.example.com", 1))
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if rotated, _ := r.Target(ctx, "cat", "good"); rotated == tgt || rotated.Server != "https://api2.example.com" {
		t.Error("a rotated kubeconfig was not picked up after the refresh interval")
	}

	for name, reason := range map[string]string{"exec": ReasonInvalidKubeconfig, "garbage": ReasonInvalidKubeconfig, "nosecret": ReasonInvalidKubeconfig, "missing": ReasonClusterNotFound} {
		_, err := r.Target(ctx, "cat", name)
		ce, ok := AsError(err)
		if !ok || ce.Reason != reason {
			t.Errorf("Target(%s) error = %v, want reason %s", name, err, reason)
		}
		if err != nil && strings.Contains(err.Error(), "steal") {
			t.Errorf("Target(%s) error quotes the kubeconfig: %v", name, err)
		}
	}
}
