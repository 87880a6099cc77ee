package landscape_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/internal/cli"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/localcluster"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/pkg/supervisor"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestMain lets this test binary stand in for the marketplane binary: `up`
// without --foreground starts its own executable as the landscape's
// supervisor, which, in a test, is this binary.
func TestMain(m *testing.M) {
	// Started by the process deployer as a provider (TestProviderCannotBind).
	if addr := os.Getenv(fakeProviderEnv); addr != "" {
		os.Exit(fakeProvider(addr, os.Args[1:]))
	}
	// Run as the CLI: by landscape tests of the commands, and as the web
	// console's process of a whole landscape (stackBinaries).
	if len(os.Args) > 1 && (os.Args[1] == "landscape" || os.Args[1] == "console") {
		if err := cli.NewRootCommand(os.Stdout).Execute(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The landscape's controllers log to its landscape.log; nothing else
	// of controller-runtime logs in these tests.
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	// Before the binaries go: should a test have ended without its
	// cleanups, the shared landscape still runs them.
	shared.mu.Lock()
	err := stopSharedStack()
	shared.mu.Unlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	if testBinDir != "" {
		_ = os.RemoveAll(testBinDir)
	}
	os.Exit(code)
}

// Timeouts. A test that hangs should fail, but not a landscape that starts
// slowly: on a loaded 2-core machine, with other packages' API servers
// running, three kube-apiservers starting at once were seen to take more
// than 90 s (TLS handshakes to themselves timing out), and a platform API
// server to wait more than 3 minutes for its landscape's etcd while the
// suite's first packages started about thirty others (load average 55).
const (
	startTimeout = 8 * time.Minute
	waitTimeout  = 90 * time.Second
	// provisionTimeout bounds a wait that includes starting an API server.
	provisionTimeout = 5 * time.Minute
)

// TestLandscape drives a landscape through the Go API: start (with a step),
// the three clusters, a ClusterRequest that gets a new API server from the
// local cluster provider and an AccessRequest against it, stop, a port
// conflict, a resume that brings the provisioned cluster back, its release,
// and down.
func TestLandscape(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "state")
	var out bytes.Buffer
	l, err := landscape.New(landscape.Config{StateDir: dir, Out: &out, StartTimeout: startTimeout, StopTimeout: 5 * time.Second})
	must(t, err)
	t.Cleanup(func() { _ = l.Stop(context.Background()) })

	var stepSaw []string
	l.AddStep("checking the step hook", func(ctx context.Context, l *landscape.Landscape) error {
		list := &clustersv1alpha1.ClusterList{}
		if err := l.Platform.Client.List(ctx, list, client.InNamespace(landscape.Namespace)); err != nil {
			return err
		}
		for _, c := range list.Items {
			if apimeta.IsStatusConditionTrue(c.Status.Conditions, common.ConditionTypeReady) {
				stepSaw = append(stepSaw, c.Name)
			}
		}
		l.AddSummary("step summary line")
		return nil
	})
	begin := time.Now()
	must(t, l.Start(ctx))
	t.Logf("start-up (fresh, in-process): %s", time.Since(begin).Round(10*time.Millisecond))
	logRSS(t, "in-process, after start", l.State(), os.Getpid())

	t.Run("steps run once the operator reports the clusters Ready", func(t *testing.T) {
		slices.Sort(stepSaw)
		if !slices.Equal(stepSaw, []string{landscape.ClusterOnboarding, landscape.ClusterWorkload}) {
			t.Errorf("the step saw Ready Clusters %v; want onboarding and workload", stepSaw)
		}
		for _, want := range []string{"starting etcd", "step summary line", "checking the step hook", "is ready"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("progress and summary lack %q:\n%s", want, out.String())
			}
		}
	})

	t.Run("each cluster answers with its written kubeconfig", func(t *testing.T) {
		for _, name := range []string{landscape.ClusterPlatform, landscape.ClusterOnboarding, landscape.ClusterWorkload} {
			c := clientFromFile(t, filepath.Join(dir, "kubeconfigs", name+".kubeconfig"))
			if err := c.List(ctx, &corev1.NamespaceList{}); err != nil {
				t.Errorf("cluster %s: %v", name, err)
			}
		}
	})

	var (
		mcpName, mcpKubeconfig string
		mcpPort                int
		accessKubeconfig       []byte
		accessSecret           string
	)
	req := &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Namespace: "default"},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeMCP},
	}
	t.Run("an mcp ClusterRequest gets a new API server from the local cluster provider", func(t *testing.T) {
		before := len(l.State().Clusters)
		begin := time.Now()
		must(t, l.Platform.Client.Create(ctx, req))
		// The grant starts a new API server: CI saw it take over 90 s at
		// load average 45, when the landscape itself took 3 minutes.
		waitForWithin(t, provisionTimeout, "ClusterRequest granted", func(ctx context.Context) (bool, error) {
			if err := l.Platform.Client.Get(ctx, client.ObjectKeyFromObject(req), req); err != nil {
				return false, err
			}
			return req.Status.IsGranted(), nil
		}, func() string { return fmt.Sprintf("%+v", req.Status) })
		t.Logf("ClusterRequest granted a new cluster in %s", time.Since(begin).Round(10*time.Millisecond))

		cluster := &clustersv1alpha1.Cluster{}
		must(t, l.Platform.Client.Get(ctx, req.Status.Cluster.NamespacedName(), cluster))
		mcpName = cluster.Name
		if cluster.Spec.Tenancy != clustersv1alpha1.TenancyExclusive || !slices.Equal(cluster.Spec.Purposes, []string{clustersv1alpha1.PurposeMCP}) ||
			cluster.Spec.Profile != localcluster.Profile || cluster.Labels[clustersv1alpha1.ProviderLabel] != localcluster.ProviderName ||
			cluster.Annotations[clusters.ProvisionedForAnnotation] != string(req.UID) {
			t.Errorf("provisioned Cluster = %+v %+v; want Exclusive mcp, profile and provider local, provisioned for the request", cluster.ObjectMeta, cluster.Spec)
		}
		rec := l.State().Clusters[mcpName]
		if rec == nil || len(l.State().Clusters) != before+1 || rec.Request == nil || rec.Request.UID != string(req.UID) {
			t.Fatalf("state records %d clusters (before %d), %s = %+v; want a new one for the request", len(l.State().Clusters), before, mcpName, rec)
		}
		mcpPort, mcpKubeconfig = rec.Port, rec.Kubeconfig
		for _, name := range []string{landscape.ClusterPlatform, landscape.ClusterOnboarding, landscape.ClusterWorkload} {
			if l.State().Clusters[name].Port == mcpPort {
				t.Errorf("the new cluster shares port %d with %s", mcpPort, name)
			}
		}
		// The admin kubeconfig in the Secret reaches the new API server.
		admin := clientFromSecret(t, l.Platform.Client, landscape.Namespace, cluster.Annotations[clusters.KubeconfigSecretAnnotation])
		must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-mcp"}}))
		if err := l.Platform.Client.Get(ctx, client.ObjectKey{Name: "only-in-mcp"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("a namespace created in the new cluster is visible on the platform cluster: %v", err)
		}
	})
	if mcpName == "" {
		t.FailNow()
	}

	t.Run("an AccessRequest against the new cluster yields a working kubeconfig", func(t *testing.T) {
		ar := &clustersv1alpha1.AccessRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Namespace: "default"},
			Spec: clustersv1alpha1.AccessRequestSpec{
				RequestRef: &common.ObjectReference{Name: req.Name, Namespace: req.Namespace},
				Token: &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{
					Namespace: "team",
					Rules:     []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create"}}},
				}}},
			},
		}
		must(t, l.Platform.Client.Create(ctx, ar))
		waitFor(t, "AccessRequest granted", func(ctx context.Context) (bool, error) {
			if err := l.Platform.Client.Get(ctx, client.ObjectKeyFromObject(ar), ar); err != nil {
				return false, err
			}
			return ar.Status.IsGranted() && ar.Status.SecretRef != nil, nil
		}, func() string { return fmt.Sprintf("%+v", ar.Status) })
		secret := &corev1.Secret{}
		must(t, l.Platform.Client.Get(ctx, client.ObjectKey{Namespace: ar.Namespace, Name: ar.Status.SecretRef.Name}, secret))
		accessKubeconfig, accessSecret = secret.Data[clustersv1alpha1.SecretKeyKubeconfig], secret.Name
		checkAccess(t, accessKubeconfig, mcpPort)
	})

	initial := l.State()
	t.Run("stop leaves no process and no listening port", func(t *testing.T) {
		must(t, l.Stop(ctx))
		checkNothingLeft(t, initial)
		if s := readState(t, dir); s.Phase != controlplane.PhaseStopped || s.Supervisor != nil {
			t.Errorf("state after Stop: phase %s, supervisor %+v; want Stopped and none", s.Phase, s.Supervisor)
		}
	})

	l2, err := landscape.New(landscape.Config{StateDir: dir, Out: &out, StartTimeout: startTimeout, StopTimeout: 5 * time.Second})
	must(t, err)
	t.Cleanup(func() { _ = l2.Stop(context.Background()) })
	resumed := t.Run("a second start resumes, moving taken ports, with the provisioned cluster and its access", func(t *testing.T) {
		// A process an earlier run left alive (as if its supervisor had
		// been killed without Pdeathsig) is stopped first.
		runner := controlplane.NewRunner(nil)
		defer runner.Close()
		leftover, err := runner.Start("leftover", "/bin/sleep", []string{"300"}, filepath.Join(dir, "logs", "leftover.log"))
		must(t, err)
		defer leftover.Stop(time.Second)
		s := readState(t, dir)
		s.Processes = map[string]*controlplane.Process{"leftover": &leftover.Record}
		must(t, controlplane.NewStore(dir, s).Update(func(*controlplane.State) error { return nil }))
		// Another program took the onboarding cluster's and the
		// provisioned cluster's ports while the landscape was stopped.
		onboardingPort := initial.Clusters[landscape.ClusterOnboarding].Port
		for _, port := range []int{onboardingPort, mcpPort} {
			takePort(t, port)
		}

		out.Reset()
		begin := time.Now()
		must(t, l2.Start(ctx))
		select {
		case <-leftover.Done():
		default:
			t.Error("the leftover process of the earlier run still runs")
		}
		t.Logf("start-up (resumed, with one provisioned cluster and two ports moved): %s", time.Since(begin).Round(10*time.Millisecond))
		for _, port := range []int{onboardingPort, mcpPort} {
			if want := fmt.Sprintf("127.0.0.1:%d (recorded for the kube-apiserver of cluster", port); !strings.Contains(out.String(), want) {
				t.Errorf("the resume does not say that it moved port %d (want %q):\n%s", port, want, out.String())
			}
		}
		rec := l2.State().Clusters[mcpName]
		if rec == nil || rec.Port == mcpPort || !controlplane.Alive(rec.APIServer) {
			t.Fatalf("provisioned cluster after resume: %+v; want it running on a new port, not %d", rec, mcpPort)
		}
		mcpPort = rec.Port
		onboarding := l2.State().Clusters[landscape.ClusterOnboarding]
		if onboarding.Port == onboardingPort {
			t.Fatalf("the onboarding cluster kept its taken port %d", onboardingPort)
		}
		// The admin kubeconfig file and the Cluster registration's
		// Secret name the new port and work.
		if err := clientFromFile(t, onboarding.Kubeconfig).List(ctx, &corev1.NamespaceList{}); err != nil {
			t.Errorf("onboarding admin kubeconfig after the move: %v", err)
		}
		c := clientFromSecret(t, l2.Platform.Client, landscape.Namespace, landscape.ClusterOnboarding+localcluster.SecretSuffix)
		if err := c.List(ctx, &corev1.NamespaceList{}); err != nil {
			t.Errorf("onboarding Cluster's kubeconfig Secret after the move: %v", err)
		}
		// The operator rewrites the AccessRequest's kubeconfig for the new
		// port; the token issued before the move is still accepted (same
		// data, keys and service-account issuer).
		secret := &corev1.Secret{}
		waitFor(t, "AccessRequest kubeconfig rewritten for the new port", func(ctx context.Context) (bool, error) {
			if err := l2.Platform.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: accessSecret}, secret); err != nil {
				return false, err
			}
			cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
			return err == nil && strings.HasSuffix(cfg.Host, ":"+strconv.Itoa(mcpPort)), nil
		}, func() string { return string(secret.Data[clustersv1alpha1.SecretKeyHost]) })
		checkAccess(t, secret.Data[clustersv1alpha1.SecretKeyKubeconfig], mcpPort)
		checkAccess(t, rewriteHost(t, accessKubeconfig, mcpPort), mcpPort)
	})
	if !resumed {
		t.FailNow() // the subtests below need the resumed landscape
	}

	t.Run("deleting the ClusterRequest stops its API server and deletes its data", func(t *testing.T) {
		rec := l2.State().Clusters[mcpName]
		// Access first, as a ManagedControlPlane does: revoking needs the cluster.
		must(t, l2.Platform.Client.Delete(ctx, &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Namespace: "default"}}))
		waitGone(t, l2.Platform.Client, &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Namespace: "default"}})
		keys, err := l2.ControlPlane().CountKeys(ctx, mcpName)
		must(t, err)
		if keys == 0 {
			t.Fatalf("no etcd keys under %s before the release: the check below could not fail", controlplane.EtcdPrefix(mcpName))
		}
		must(t, l2.Platform.Client.Delete(ctx, req))
		waitGone(t, l2.Platform.Client, req)
		if controlplane.Alive(rec.APIServer) || controlplane.Alive(rec.ControllerManager) {
			t.Error("the provisioned cluster's processes still run")
		}
		if err := controlplane.CheckPortFree(mcpPort, "the released cluster"); err != nil {
			t.Error(err)
		}
		if keys, err := l2.ControlPlane().CountKeys(ctx, mcpName); err != nil || keys != 0 {
			t.Errorf("etcd keys under %s after the release: %d (%v); want 0", controlplane.EtcdPrefix(mcpName), keys, err)
		}
		for _, obj := range []client.Object{
			&clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: mcpName, Namespace: landscape.Namespace}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: mcpName + localcluster.SecretSuffix, Namespace: landscape.Namespace}},
		} {
			if err := l2.Platform.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s after the release: %v; want NotFound", obj, obj.GetName(), err)
			}
		}
		if _, ok := l2.State().Clusters[mcpName]; ok {
			t.Error("the released cluster is still recorded in state.json")
		}
		if _, err := os.Stat(mcpKubeconfig); !os.IsNotExist(err) {
			t.Errorf("kubeconfig of the released cluster: %v; want it removed", err)
		}
	})

	t.Run("down leaves no process, no port and no state directory", func(t *testing.T) {
		all := l2.State()
		must(t, l2.Stop(ctx))
		must(t, landscape.Down(ctx, dir, nil))
		checkNothingLeft(t, all)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("state directory after down: %v", err)
		}
	})
}

// TestCrashRecovery uses the commands as a user does: `landscape up` starts
// the landscape in the background (this test binary stands in for
// marketplane); the supervisor is killed with SIGKILL; `status` reports it
// gone; another program takes a recorded port; `up` resumes on the stale
// state, on a new port for the taken one; `down` removes everything.
func TestCrashRecovery(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "state")
	t.Cleanup(func() { _ = landscape.Down(context.Background(), dir, nil) })

	begin := time.Now()
	out := runCLI(t, "landscape", "up", "--control-plane-only", "--state-dir", dir, "--start-timeout", startTimeout.String())
	t.Logf("start-up (fresh, 'landscape up'): %s", time.Since(begin).Round(10*time.Millisecond))
	if !strings.Contains(out, "starting etcd") || !strings.Contains(out, "is ready") {
		t.Errorf("up did not show progress and summary:\n%s", out)
	}
	first := readState(t, dir)
	logRSS(t, "'landscape up', after start", first, first.Supervisor.PID)

	must(t, syscall.Kill(first.Supervisor.PID, syscall.SIGKILL))
	// Every process dies with the supervisor (Pdeathsig).
	waitFor(t, "processes of the killed landscape gone", func(context.Context) (bool, error) {
		return !slices.ContainsFunc(append(first.RecordedProcesses(), first.Supervisor), controlplane.Alive), nil
	}, func() string { return fmt.Sprintf("%+v", first.RecordedProcesses()) })
	if out := runCLI(t, "landscape", "status", "--state-dir", dir); !strings.Contains(out, "not running") {
		t.Errorf("status after the crash does not say it is not running:\n%s", out)
	}

	// Another program took the platform API server's port meanwhile (on a
	// busy machine any recorded port may be taken while the landscape is
	// down): the resume moves it and says so.
	taken := first.Clusters[landscape.ClusterPlatform].Port
	takePort(t, taken)

	begin = time.Now()
	out = runCLI(t, "landscape", "up", "--control-plane-only", "--state-dir", dir, "--start-timeout", startTimeout.String())
	t.Logf("start-up (resumed after SIGKILL, 'landscape up'): %s", time.Since(begin).Round(10*time.Millisecond))
	if !strings.Contains(out, "resuming") {
		t.Errorf("up after the crash did not resume:\n%s", out)
	}
	second := readState(t, dir)
	if second.Supervisor == nil || second.Supervisor.PID == first.Supervisor.PID || second.Phase != controlplane.PhaseReady {
		t.Fatalf("state after the second up: phase %s, supervisor %+v", second.Phase, second.Supervisor)
	}
	for _, name := range []string{landscape.ClusterPlatform, landscape.ClusterOnboarding, landscape.ClusterWorkload} {
		c := clientFromFile(t, second.Clusters[name].Kubeconfig)
		if err := c.List(ctx, &corev1.NamespaceList{}); err != nil {
			t.Errorf("cluster %s after the resume: %v", name, err)
		}
		from, to := first.Clusters[name].Port, second.Clusters[name].Port
		moved := strings.Contains(out, fmt.Sprintf("127.0.0.1:%d (recorded for the kube-apiserver of cluster %s) is taken by another process; using 127.0.0.1:%d", from, name, to))
		switch {
		case name == landscape.ClusterPlatform && (to == taken || !moved):
			t.Errorf("cluster %s: port %d -> %d; want it moved off the taken port and the move reported:\n%s", name, from, to, out)
		case from != to && !moved:
			t.Errorf("cluster %s moved from port %d to %d without saying so:\n%s", name, from, to, out)
		}
	}
	// The platform kept its data: the Clusters registered by the first run.
	platform := clientFromFile(t, second.Clusters[landscape.ClusterPlatform].Kubeconfig)
	cl := &clustersv1alpha1.Cluster{}
	must(t, platform.Get(ctx, client.ObjectKey{Namespace: landscape.Namespace, Name: landscape.ClusterOnboarding}, cl))
	if cl.CreationTimestamp.After(first.ReadyAt.Add(time.Second)) {
		t.Errorf("Cluster onboarding was created again (%s) after the first run was ready (%s)", cl.CreationTimestamp, first.ReadyAt)
	}

	out = runCLI(t, "landscape", "down", "--state-dir", dir)
	if !strings.Contains(out, "stopping the landscape") {
		t.Errorf("down did not stop the running landscape:\n%s", out)
	}
	checkNothingLeft(t, second)
	if controlplane.Alive(second.Supervisor) {
		t.Error("the supervisor runs after down")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state directory after down: %v", err)
	}
}

// TestDownStopsLeftovers checks that down stops processes a killed
// landscape left alive, and only processes that are really its own.
func TestDownStopsLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process; run without -short")
	}
	dir := filepath.Join(t.TempDir(), "state")
	layout, err := landscape.PrepareStateDir(dir)
	must(t, err)
	runner := controlplane.NewRunner(nil)
	defer runner.Close()
	sleep, err := runner.Start("leftover", "/bin/sleep", []string{"300"}, layout.Log("leftover"))
	if err != nil {
		t.Skip("no /bin/sleep:", err)
	}
	defer sleep.Stop(time.Second)
	self, err := controlplane.Self()
	must(t, err)
	impostor := *self // this test's PID under another record: not ours
	impostor.Name, impostor.StartTime = "impostor", self.StartTime+1
	store := controlplane.NewStore(layout.Dir, &controlplane.State{Processes: map[string]*controlplane.Process{
		"leftover": &sleep.Record, "impostor": &impostor,
	}})
	must(t, store.Update(func(*controlplane.State) error { return nil }))

	must(t, landscape.Down(t.Context(), dir, nil))
	select {
	case <-sleep.Done():
	case <-time.After(10 * time.Second):
		t.Error("down did not stop the recorded leftover process")
	}
	// Down did not signal this process under the impostor record (or this
	// test would have ended here).
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state directory after down: %v", err)
	}
}

// TestStateDirGuard checks that a directory that is not a landscape's is
// neither used nor removed.
func TestStateDirGuard(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o600))
	if _, err := landscape.PrepareStateDir(dir); err == nil || !strings.Contains(err.Error(), "not a landscape state directory") && !strings.Contains(err.Error(), "neither empty nor") {
		t.Errorf("PrepareStateDir on a foreign directory = %v; want a refusal", err)
	}
	if err := landscape.Down(t.Context(), dir, nil); err == nil {
		t.Error("Down on a foreign directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious.txt")); err != nil {
		t.Errorf("a file of the foreign directory is gone: %v", err)
	}
}

// TestMissingBinaries checks the error that names make tools.
func TestMissingBinaries(t *testing.T) {
	_, err := landscape.New(landscape.Config{StateDir: t.TempDir(), BinDir: t.TempDir()})
	if !errors.Is(err, controlplane.ErrBinaryMissing) || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("New with an empty bin directory = %v; want ErrBinaryMissing naming make tools", err)
	}
}

// checkAccess checks that an AccessRequest kubeconfig reaches the cluster
// on port with exactly the granted rights.
func checkAccess(t *testing.T, kubeconfig []byte, port int) {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	must(t, err)
	if !strings.HasSuffix(cfg.Host, ":"+strconv.Itoa(port)) {
		t.Errorf("access kubeconfig points at %s; want port %d", cfg.Host, port)
	}
	c, err := client.New(cfg, client.Options{})
	must(t, err)
	ctx := t.Context()
	if err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("team")); err != nil {
		t.Errorf("access token: list configmaps in team: %v", err)
	}
	if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace("team")); !apierrors.IsForbidden(err) {
		t.Errorf("access token: list secrets in team = %v; want Forbidden", err)
	}
}

// takePort makes sure another program holds a loopback port until the test
// ends: it listens on it. A port that cannot be listened on is already
// taken, possibly only for a moment (the local end of some connection, on
// a busy machine): it retries until it holds the port or the port has been
// taken for the whole wait, which counts as taken too.
func takePort(t *testing.T, port int) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var lastErr error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			lastErr = err
			return false, nil
		}
		t.Cleanup(func() { _ = ln.Close() })
		return true, nil
	})
	if err != nil {
		t.Logf("%s stayed taken by another process for 30s (%v); the test uses it as taken", addr, lastErr)
	}
}

// rewriteHost returns kubeconfig with its server moved to a loopback port,
// as a user whose copy of the kubeconfig predates a port move would fix it.
func rewriteHost(t *testing.T, kubeconfig []byte, port int) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	must(t, err)
	for _, c := range cfg.Clusters {
		c.Server = "https://127.0.0.1:" + strconv.Itoa(port)
	}
	out, err := clientcmd.Write(*cfg)
	must(t, err)
	return out
}

// checkNothingLeft checks that no process of s is alive and every port of s
// is free.
func checkNothingLeft(t *testing.T, s *controlplane.State) {
	t.Helper()
	for _, p := range s.RecordedProcesses() {
		if controlplane.Alive(p) {
			t.Errorf("%s (pid %d) is still alive", p.Name, p.PID)
		}
	}
	if len(s.Ports()) < 5 {
		t.Errorf("state records %d ports; want etcd's two and one per cluster", len(s.Ports()))
	}
	for port, use := range s.Ports() {
		if err := controlplane.CheckPortFree(port, use); err != nil {
			t.Error(err)
		}
	}
}

// logRSS logs the resident memory of the landscape's processes.
func logRSS(t *testing.T, when string, s *controlplane.State, supervisorPID int) {
	t.Helper()
	var total int64
	var parts []string
	for _, p := range s.RecordedProcesses() {
		n, err := supervisor.ResidentMemory(p.PID)
		if err != nil {
			t.Logf("RSS of %s: %v", p.Name, err)
			continue
		}
		total += n
		parts = append(parts, fmt.Sprintf("%s %d", p.Name, n>>20))
	}
	n, err := supervisor.ResidentMemory(supervisorPID)
	if err == nil {
		total += n
		parts = append(parts, fmt.Sprintf("supervisor %d", n>>20))
	}
	slices.Sort(parts)
	t.Logf("resident memory (%s): %d MiB in total; MiB per process: %s", when, total>>20, strings.Join(parts, ", "))
}

func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := cli.NewRootCommand(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("marketplane %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func readState(t *testing.T, dir string) *controlplane.State {
	t.Helper()
	s, err := controlplane.ReadState(dir)
	must(t, err)
	return s
}

func clientFromFile(t *testing.T, path string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	must(t, err)
	scheme, err := install.NewScheme()
	must(t, err)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	must(t, err)
	return c
}

func clientFromSecret(t *testing.T, c client.Client, namespace, name string) client.Client {
	t.Helper()
	secret := &corev1.Secret{}
	must(t, c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, secret))
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clusters.KubeconfigSecretKey])
	must(t, err)
	out, err := client.New(cfg, client.Options{})
	must(t, err)
	return out
}

func waitFor(t *testing.T, what string, cond wait.ConditionWithContextFunc, describe func() string) {
	t.Helper()
	waitForWithin(t, waitTimeout, what, cond, describe)
}

// waitForWithin is waitFor with its own timeout, for a step that starts
// processes.
func waitForWithin(t *testing.T, timeout time.Duration, what string, cond wait.ConditionWithContextFunc, describe func() string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("%s: %v; last seen: %s", what, err, describe())
	}
}

func waitGone(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%T %s gone", obj, obj.GetName()), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, func() string { return fmt.Sprintf("%+v", obj) })
}

// requireBinaries skips t under -short (it starts a landscape) and fails it
// when the control plane's binaries are missing.
//
// The first call builds the operator, which every landscape runs, into a
// directory of the package beside links to the tools of bin/, and makes it
// the binary directory of every landscape the tests start (also of the
// supervisors `landscape up` starts, which inherit the environment): `make
// test` builds only the tools into bin/, and a test must not run a stale
// operator a user built there.
func requireBinaries(t *testing.T) {
	t.Helper()
	testenv.SkipIfShort(t)
	binDirOnce.Do(func() { binDirErr = prepareBinDir(t) })
	if binDirErr != nil {
		// Not a skip: a silently skipped landscape test would pass CI
		// without testing anything. `make test` builds the binaries.
		t.Fatalf("%v (run 'make tools')", binDirErr)
	}
}

var (
	binDirOnce sync.Once
	binDirErr  error
	// testBinDir is the directory requireBinaries prepared; TestMain
	// removes it.
	testBinDir string
)

// prepareBinDir builds the operator into a new directory, links the tools
// of bin/ beside it and points controlplane.AssetsEnv at it.
func prepareBinDir(t *testing.T) error {
	src, err := controlplane.BinDir("")
	if err != nil {
		return err
	}
	if _, err := controlplane.FindBinaries(src); err != nil {
		return err
	}
	// Not t.TempDir: the directory serves every test of the package,
	// and TestMain removes it.
	dir, err := os.MkdirTemp("", "landscape-test-bin-") //nolint:usetesting // lives as long as the package's tests

	if err != nil {
		return err
	}
	testBinDir = dir
	if err := linkTools(src, dir); err != nil {
		return err
	}
	testenv.BuildBinaries(t, dir, "github.com/marketplane/marketplane/cmd/"+landscape.OperatorBinary)
	// Not t.Setenv: it must hold for the parallel tests and for the
	// supervisors they start, set once before any landscape starts.
	return os.Setenv(controlplane.AssetsEnv, dir) //nolint:usetesting // process-wide on purpose, see above
}

// linkTools links every entry of src into dst that dst does not have.
func linkTools(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		target := filepath.Join(dst, e.Name())
		if _, err := os.Lstat(target); err == nil || e.IsDir() {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), target); err != nil {
			return err
		}
	}
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestOperatorLeaseTooShort checks that a lease the replicas could not
// renew before it ends is refused with the numbers.
func TestOperatorLeaseTooShort(t *testing.T) {
	_, err := landscape.New(landscape.Config{StateDir: t.TempDir(), OperatorLease: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "lease of 5s is too short") || !strings.Contains(err.Error(), "more than 5s") {
		t.Errorf("New with a lease of 5s = %v; want it refused, naming the renewal", err)
	}
}
