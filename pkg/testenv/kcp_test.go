package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestKCP starts kcp, creates two workspaces and shows that what one holds
// is not seen from the other.
func TestKCP(t *testing.T) {
	k := testenv.StartKCP(t)
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	workspaces := dyn.Resource(schema.GroupVersionResource{Group: "tenancy.kcp.io", Version: "v1alpha1", Resource: "workspaces"})
	for _, name := range []string{"one", "two"} {
		ws := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": map[string]any{"name": name},
		}}
		if _, err := workspaces.Create(ctx, ws, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create workspace %s: %v", name, err)
		}
	}
	// A workspace is Ready within seconds on an idle machine.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"one", "two"} {
			ws, err := workspaces.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if phase, _, _ := unstructured.NestedString(ws.Object, "status", "phase"); phase != "Ready" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("workspaces not Ready: %v\nkcp:\n%s", err, k.Log())
	}
	one := kubernetes.NewForConfigOrDie(k.WorkspaceConfig("root:one"))
	two := kubernetes.NewForConfigOrDie(k.WorkspaceConfig("root:two"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-one", Namespace: "default"}}
	if _, err := one.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create in workspace one: %v", err)
	}
	if _, err := two.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("workspace two sees workspace one's ConfigMap: %v", err)
	}
	if !strings.HasPrefix(k.Config.Host, k.URL+"/clusters/root") {
		t.Errorf("admin config's server %q is not the root workspace of %s", k.Config.Host, k.URL)
	}
}
