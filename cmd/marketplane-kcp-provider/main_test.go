package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/kcpprovider"
	"github.com/marketplane/marketplane/pkg/kubeconfig"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestBinary runs the built binary as the operator would: init without a
// kcp kubeconfig fails naming the flag and the variable; init and run with
// kcp's admin kubeconfig in $KCP_KUBECONFIG succeed, and run writes the
// kubeconfig Secret of a Cluster of its profile.
func TestBinary(t *testing.T) {
	dir := t.TempDir()
	testenv.BuildBinaries(t, dir, ".")
	bin := filepath.Join(dir, "marketplane-kcp-provider")
	args := []string{"--environment=test", "--provider-name=kcp-bin"}

	out, err := exec.CommandContext(t.Context(), bin, append([]string{"init"}, args...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--kcp-kubeconfig") || !strings.Contains(string(out), "$KCP_KUBECONFIG") {
		t.Fatalf("init without a kcp kubeconfig: want a failure naming --kcp-kubeconfig and $KCP_KUBECONFIG, got %v:\n%s", err, out)
	}

	platform := testenv.Start(t, testenv.WithName("platform"))
	kcp := testenv.StartKCP(t)
	platformKubeconfig, err := platform.KubeconfigPath()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "KCP_KUBECONFIG="+kcp.KubeconfigPath, "KUBECONFIG="+platformKubeconfig, "POD_NAMESPACE=default")
	initCmd := exec.CommandContext(t.Context(), bin, append([]string{"init"}, args...)...)
	initCmd.Env = env
	if out, err := initCmd.CombinedOutput(); err != nil {
		t.Fatalf("init with kcp's admin kubeconfig: %v\n%s", err, out)
	}

	var log bytes.Buffer
	run := exec.Command(bin, append([]string{"run", "--metrics-bind-address=0", "--leader-elect"}, args...)...)
	run.Env, run.Stdout, run.Stderr = env, &log, &log
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run.Process.Signal(syscall.SIGTERM)
		_ = run.Wait()
		if t.Failed() {
			t.Logf("run's log:\n%s", log.String())
		}
	})

	ctx := t.Context()
	profile := &clustersv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "kcp"},
		Spec: clustersv1alpha1.ClusterProfileSpec{
			ProviderRef:       common.LocalObjectReference{Name: "kcp-bin"},
			ProviderConfigRef: common.LocalObjectReference{Name: "kcp-bin"},
			SupportedVersions: []clustersv1alpha1.SupportedK8sVersion{{Version: "1.32.0"}},
		},
	}
	cl := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp", Namespace: "default"},
		Spec:       clustersv1alpha1.ClusterSpec{Profile: "kcp", Tenancy: clustersv1alpha1.TenancyExclusive},
	}
	for _, obj := range []client.Object{profile, cl} {
		if err := platform.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	secret := &corev1.Secret{}
	for {
		err := platform.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "mcp-kubeconfig"}, secret)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 90 s for the kubeconfig Secret written by run; last: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if got, want := secret.Annotations[kcpprovider.WorkspaceAnnotation], "root:"+kcpprovider.WorkspaceName(string(cl.UID)); got != want {
		t.Errorf("Secret's workspace annotation = %q, want %q", got, want)
	}
	cfg, err := kubeconfig.Parse(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		t.Fatalf("the Secret's kubeconfig: %v", err)
	}
	if cfg.BearerToken == "" || strings.Contains(log.String(), cfg.BearerToken) {
		t.Errorf("the kubeconfig's token is empty or in run's log")
	}
}
