package process_test

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
)

// contractEnv is the environment a probe process of w must get: the
// inherited variables, spec.env, the POD_* variables and KUBECONFIG, and
// nothing else.
func contractEnv(w *deploy.Workload, podName, serviceAccount, kubeconfig string) map[string]string {
	env := map[string]string{}
	for _, name := range process.DefaultInheritedEnv {
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
		}
	}
	for _, e := range w.Env {
		env[e.Name] = e.Value
	}
	env["POD_NAME"] = podName
	env["POD_NAMESPACE"] = w.Namespace
	env["POD_IP"] = "127.0.0.1"
	env["POD_SERVICE_ACCOUNT_NAME"] = serviceAccount
	env["KUBECONFIG"] = kubeconfig
	return env
}

// withInCluster adds to env the address of the platform API server as
// in-cluster clients read it, which processes get where the system allows
// the service-account files (see checkNamespaceFile).
func withInCluster(t *testing.T, d *process.Deployer, f *fixture, env map[string]string) map[string]string {
	t.Helper()
	if process.NamespaceFileError(d) != nil {
		return env
	}
	u, err := url.Parse(f.platform.Config.Host)
	must(t, err)
	env[process.EnvServiceHost], env[process.EnvServicePort] = u.Hostname(), u.Port()
	return env
}

func saUser(ns, sa string) string { return "system:serviceaccount:" + ns + ":" + sa }

// TestInitThenRun runs the probe through init and run and checks that each
// got exactly the contract arguments and environment and a kubeconfig of
// its own ServiceAccount, that run starts only when Run is called, and that
// Remove leaves no process and no credential behind.
func TestInitThenRun(t *testing.T) {
	f := newFixture(t)
	_, hostFileErr := os.Stat(process.ServiceAccountNamespaceFile)
	// A variable of the operator's environment that must not leak.
	t.Setenv("MARKETPLANE_OPERATOR_SECRET", "do-not-pass")
	d := f.deployer(process.WithReadyGrace(300 * time.Millisecond))
	w := f.workload(func(w *deploy.Workload) {
		w.RunArgs = []string{"--leader-elect=false", "--metrics-bind-address=:18090"}
		w.Metrics = deploy.Metrics{Enabled: true, Port: 18090, Path: "/metrics"}
	})
	ctx := t.Context()

	st, err := d.Init(ctx, w)
	must(t, err)
	if st.State != deploy.InitRunning || st.Attempt != 1 || st.RetryAfter <= 0 {
		t.Fatalf("first Init: got %+v, want Running, attempt 1, a RetryAfter to poll", st)
	}
	initSucceeded(t, d, w)

	inits := f.reports(w.InitName)
	if len(inits) != 1 {
		t.Fatalf("init ran %d times, want once", len(inits))
	}
	in := inits[0]
	if diff := cmp.Diff([]string{"init", "--environment=test", "--provider-name=probe", "--verbosity=INFO"}, in.Args); diff != "" {
		t.Errorf("init args (-want +got):\n%s", diff)
	}
	initKubeconfig := filepath.Join(f.providerDir(), "init.kubeconfig")
	if diff := cmp.Diff(withInCluster(t, d, f, contractEnv(w, "sp-probe-init", "sp-probe-init", initKubeconfig)), in.Env); diff != "" {
		t.Errorf("init env (-want +got):\n%s", diff)
	}
	if in.AuthError != "" || in.Username != saUser(f.ns, "sp-probe-init") {
		t.Errorf("init kubeconfig: user %q (error %q), want %q", in.Username, in.AuthError, saUser(f.ns, "sp-probe-init"))
	}
	for _, file := range []string{"init.kubeconfig", "init.token"} {
		if exists(filepath.Join(f.providerDir(), file)) {
			t.Errorf("%s still exists after init ended; init credentials should be gone", file)
		}
	}
	if !exists(filepath.Join(f.providerDir(), "init-1.done")) {
		t.Error("init-1.done missing after init succeeded")
	}
	if got := f.reports("sp-probe-0"); len(got) != 0 {
		t.Fatalf("a run process started before Run was called: %+v", got)
	}

	rs, err := d.Run(ctx, w)
	must(t, err)
	if rs.Ready {
		t.Errorf("first Run: Ready before the grace period passed: %+v", rs)
	}
	rs = waitReady(t, d, w)
	runs := f.waitReports("sp-probe-0", 1)
	run := runs[0]
	metrics, probe := flagArg(run.Args, "--metrics-bind-address"), flagArg(run.Args, "--health-probe-bind-address")
	wantArgs := []string{"run", "--environment=test", "--provider-name=probe", "--verbosity=INFO", "--leader-elect=false",
		"--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probe}
	if diff := cmp.Diff(wantArgs, run.Args); diff != "" {
		t.Errorf("run args (-want +got):\n%s", diff)
	}
	checkListenAddresses(t, "run of sp-probe-0", metrics, probe)
	if want := "sp-probe-0 listens on metrics " + metrics + ", health probe " + probe; !strings.Contains(rs.Message, want) {
		t.Errorf("Ready message %q does not publish the ports: want it to contain %q", rs.Message, want)
	}
	checkNamespaceFile(t, d, f.ns, in, run)
	runKubeconfig := filepath.Join(f.providerDir(), "run.kubeconfig")
	if diff := cmp.Diff(withInCluster(t, d, f, contractEnv(w, "sp-probe-0", "sp-probe", runKubeconfig)), run.Env); diff != "" {
		t.Errorf("run env (-want +got):\n%s", diff)
	}
	if run.AuthError != "" || run.Username != saUser(f.ns, "sp-probe") {
		t.Errorf("run kubeconfig: user %q (error %q), want %q", run.Username, run.AuthError, saUser(f.ns, "sp-probe"))
	}
	for _, file := range []string{"run.kubeconfig", "run.token"} {
		info, err := os.Stat(filepath.Join(f.providerDir(), file))
		must(t, err)
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", file, info.Mode().Perm())
		}
	}
	kc, err := clientcmd.LoadFromFile(runKubeconfig)
	must(t, err)
	want, _, err := rest.DefaultServerUrlFor(f.platform.Config)
	must(t, err)
	for name, c := range kc.Clusters {
		if c.Server != want.String() || !slices.Equal(c.CertificateAuthorityData, f.platform.Config.CAData) {
			t.Errorf("kubeconfig cluster %s: server %q, want %q; CA equal to the platform's: %v",
				name, c.Server, want, slices.Equal(c.CertificateAuthorityData, f.platform.Config.CAData))
		}
	}
	for _, log := range []string{"init.log", "run-0.log"} {
		data, err := os.ReadFile(filepath.Join(f.providerDir(), log))
		must(t, err)
		if !strings.Contains(string(data), "probe: ") {
			t.Errorf("%s does not hold the probe's output:\n%s", log, data)
		}
	}

	waitRemoved(t, d, w)
	if alive(run.PID) {
		t.Errorf("run process %d still alive after Remove", run.PID)
	}
	for _, file := range []string{"run.kubeconfig", "run.token", "init-1.done"} {
		if exists(filepath.Join(f.providerDir(), file)) {
			t.Errorf("%s still exists after Remove", file)
		}
	}
	if !exists(filepath.Join(f.providerDir(), "run-0.log")) {
		t.Error("Remove deleted the logs; they should stay for debugging")
	}
	if _, err := os.Stat(process.ServiceAccountNamespaceFile); (err == nil) != (hostFileErr == nil) {
		t.Errorf("%s on the host: exists before %v, after %v; the namespace file must only exist in the processes' mount namespaces",
			process.ServiceAccountNamespaceFile, hostFileErr == nil, err == nil)
	}
}

// flagArg returns the value of --name=value in args.
func flagArg(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// checkListenAddresses checks that addrs are distinct host:port addresses
// on loopback with a real port.
func checkListenAddresses(t *testing.T, what string, addrs ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" || port == "0" {
			t.Errorf("%s: listen address %q, want 127.0.0.1:<free port>", what, a)
		}
		if seen[a] {
			t.Errorf("%s: listen address %s given twice", what, a)
		}
		seen[a] = true
	}
}

// checkNamespaceFile checks that the processes that wrote reports found ns
// in the service-account namespace file, or, where the system does not
// allow it, that they did not and the deployer says why.
func checkNamespaceFile(t *testing.T, d *process.Deployer, ns string, reports ...report) {
	t.Helper()
	if err := process.NamespaceFileError(d); err != nil {
		t.Logf("this system cannot provide the namespace file: %v", err)
		return
	}
	for _, r := range reports {
		if r.NamespaceFile != ns {
			t.Errorf("%s process %d: namespace file %q, want %q", r.Subcommand, r.PID, r.NamespaceFile, ns)
		}
		// The in-cluster configuration (what openMCP's libraries load
		// without --kubeconfig) reaches the platform as the same user as
		// the kubeconfig.
		if r.InClusterUser != r.Username || r.InClusterError != "" {
			t.Errorf("%s process %d: in-cluster configuration connects as %q (error %q), want the kubeconfig's user %q",
				r.Subcommand, r.PID, r.InClusterUser, r.InClusterError, r.Username)
		}
	}
}

// TestInitOncePerGeneration checks that a new Deployer on the same state
// directory does not run init again for a generation that succeeded, but
// does for a new generation and for a new object of the same name.
func TestInitOncePerGeneration(t *testing.T) {
	f := newFixture(t)
	w := f.workload()
	first := f.deployer()
	initSucceeded(t, first, w)
	must(t, first.Close())

	second := f.deployer()
	st, err := second.Init(t.Context(), w)
	must(t, err)
	if st.State != deploy.InitSucceeded {
		t.Fatalf("restarted deployer, same generation: got %+v, want %s without running init", st, deploy.InitSucceeded)
	}
	if n := len(f.reports(w.InitName)); n != 1 {
		t.Fatalf("init ran %d times for generation 1, want once", n)
	}

	w.Generation = 2
	st, err = second.Init(t.Context(), w)
	must(t, err)
	if st.State != deploy.InitRunning {
		t.Fatalf("new generation: got %+v, want %s", st, deploy.InitRunning)
	}
	initSucceeded(t, second, w)
	if n := len(f.reports(w.InitName)); n != 2 {
		t.Fatalf("init ran %d times after generation 2, want twice", n)
	}

	// The object was deleted and created again while the operator was
	// down: same name and generation, another UID.
	third := f.deployer()
	w.Owner.UID = "uid-2"
	st, err = third.Init(t.Context(), w)
	must(t, err)
	if st.State != deploy.InitRunning {
		t.Fatalf("new object, same generation: got %+v, want %s", st, deploy.InitRunning)
	}
	initSucceeded(t, third, w)
}

// TestInitFailureRetriedAfterBackoff checks that a failing init is Failed
// with its exit code and output, is not retried before deploy.InitBackoff
// has passed, and is retried after.
func TestInitFailureRetriedAfterBackoff(t *testing.T) {
	f := newFixture(t)
	failWhile := filepath.Join(t.TempDir(), "fail")
	must(t, os.WriteFile(failWhile, nil, 0o600))
	w := f.workload(func(w *deploy.Workload) {
		w.Env = append(w.Env,
			corev1.EnvVar{Name: "PROBE_INIT_EXIT", Value: "3"},
			corev1.EnvVar{Name: "PROBE_INIT_FAIL_WHILE", Value: failWhile})
	})
	clock := clocktesting.NewFakeClock(time.Now())
	d := f.deployer(process.WithClock(clock))

	st := waitInit(t, d, w)
	if st.State != deploy.InitFailed || st.Attempt != 1 || st.RetryAfter != deploy.InitBackoff(1) {
		t.Fatalf("failed init: got %+v, want Failed, attempt 1, RetryAfter %v", st, deploy.InitBackoff(1))
	}
	for _, want := range []string{"exited with code 3", "attempt 1", "init failing as asked with code 3"} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("message %q does not contain %q", st.Message, want)
		}
	}
	if len(st.Message) > 600 {
		t.Errorf("message is %d bytes long; keep it short", len(st.Message))
	}

	clock.Step(deploy.InitBackoff(1) - time.Second)
	st, err := d.Init(t.Context(), w)
	must(t, err)
	if st.State != deploy.InitFailed || st.RetryAfter != time.Second {
		t.Fatalf("during backoff: got %+v, want Failed with RetryAfter 1s", st)
	}
	if n := len(f.reports(w.InitName)); n != 1 {
		t.Fatalf("init ran %d times during the backoff, want once", n)
	}

	must(t, os.Remove(failWhile))
	clock.Step(time.Second)
	st, err = d.Init(t.Context(), w)
	must(t, err)
	if st.State != deploy.InitRunning || st.Attempt != 2 {
		t.Fatalf("after backoff: got %+v, want Running attempt 2", st)
	}
	st = waitInit(t, d, w)
	if st.State != deploy.InitSucceeded || st.Attempt != 2 {
		t.Fatalf("second attempt: got %+v, want Succeeded attempt 2", st)
	}
}

// TestRunReplicasAndChanges checks two replicas with distinct POD_NAME and
// metrics ports, that Run waits for init of a new generation, and that a
// new generation replaces the processes.
func TestRunReplicasAndChanges(t *testing.T) {
	f := newFixture(t)
	d := f.deployer(process.WithReadyGrace(300 * time.Millisecond))
	w := f.workload(func(w *deploy.Workload) {
		w.Replicas = 2
		w.RunArgs = []string{"--leader-elect=true", "--metrics-bind-address=:18080"}
		w.Metrics = deploy.Metrics{Enabled: true, Port: 18080, Path: "/metrics"}
	})
	initSucceeded(t, d, w)
	waitReady(t, d, w)

	var pids []int
	var addrs []string
	for i := range 2 {
		pod := "sp-probe-" + string(rune('0'+i))
		r := f.waitReports(pod, 1)[0]
		if r.Env["POD_NAME"] != pod {
			t.Errorf("replica %d: POD_NAME %q, want %q", i, r.Env["POD_NAME"], pod)
		}
		metrics, probe := flagArg(r.Args, "--metrics-bind-address"), flagArg(r.Args, "--health-probe-bind-address")
		want := append(append([]string{"run"}, contractArgs...), "--leader-elect=true", "--metrics-bind-address="+metrics, "--health-probe-bind-address="+probe)
		if diff := cmp.Diff(want, r.Args); diff != "" {
			t.Errorf("replica %d args (-want +got):\n%s", i, diff)
		}
		addrs = append(addrs, metrics, probe)
		pids = append(pids, r.PID)
	}
	// Replicas share the loopback interface: every endpoint of every
	// replica needs its own port.
	checkListenAddresses(t, "two replicas", addrs...)

	// Generation 2 before its init succeeded: Run must not touch anything.
	w2 := *w
	w2.Generation = 2
	w2.Args = []string{"--environment=test", "--provider-name=probe", "--verbosity=DEBUG"}
	rs, err := d.Run(t.Context(), &w2)
	must(t, err)
	if rs.Ready || !strings.Contains(rs.Message, "init has not succeeded for generation 2") {
		t.Errorf("Run before init of generation 2: got %+v", rs)
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Errorf("run process %d of generation 1 stopped before init of generation 2 succeeded", pid)
		}
	}

	initSucceeded(t, d, &w2)
	waitReady(t, d, &w2)
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("run process %d of generation 1 still alive after generation 2 is ready", pid)
		}
	}
	for _, pod := range []string{"sp-probe-0", "sp-probe-1"} {
		rs := f.waitReports(pod, 2)
		if len(rs) != 2 {
			t.Fatalf("%s started %d times, want twice (generation 1 and 2)", pod, len(rs))
		}
		var debug int
		for _, r := range rs {
			if slices.Contains(r.Args, "--verbosity=DEBUG") {
				debug++
			}
		}
		if debug != 1 {
			t.Errorf("%s: %d processes with the generation 2 args, want 1", pod, debug)
		}
	}
	waitRemoved(t, d, &w2)
}

// TestCrashingRunIsRestarted checks that a run process that exits is
// restarted, and that Run reports why it is not ready.
func TestCrashingRunIsRestarted(t *testing.T) {
	f := newFixture(t)
	d := f.deployer(process.WithRestartBackoff(func(int32) time.Duration { return 50 * time.Millisecond }))
	w := f.workload(func(w *deploy.Workload) {
		w.Env = append(w.Env, corev1.EnvVar{Name: "PROBE_RUN_CRASH", Value: "1"})
	})
	initSucceeded(t, d, w)
	rs, err := d.Run(t.Context(), w)
	must(t, err)
	if rs.Ready {
		t.Fatalf("Run ready at once: %+v", rs)
	}
	runs := f.waitReports("sp-probe-0", 3)
	seen := map[int]bool{}
	for _, r := range runs {
		seen[r.PID] = true
	}
	if len(seen) < 3 {
		t.Errorf("restarts reused a PID: %d reports, %d PIDs", len(runs), len(seen))
	}
	poll(t, 10*time.Second, "a status that names the crash", func() (bool, error) {
		rs, err = d.Run(t.Context(), w)
		return strings.Contains(rs.Message, "exited with code 2"), err
	})
	if rs.Ready || !rs.Crashing || !strings.Contains(rs.Message, "run crashing as asked") {
		t.Errorf("status of a crashing run: %+v, want not ready, crashing, with the process's output", rs)
	}
}

// TestRemoveKillsStubbornProcesses checks that Remove escalates to SIGKILL
// for processes that ignore SIGTERM and reports done only once they are
// gone.
func TestRemoveKillsStubbornProcesses(t *testing.T) {
	f := newFixture(t)
	const stopTimeout = time.Second
	d := f.deployer(process.WithStopTimeout(stopTimeout), process.WithReadyGrace(100*time.Millisecond))
	w := f.workload(func(w *deploy.Workload) {
		w.Replicas = 2
		w.Env = append(w.Env, corev1.EnvVar{Name: "PROBE_IGNORE_SIGTERM", Value: "1"})
	})
	initSucceeded(t, d, w)
	waitReady(t, d, w)
	pids := []int{f.waitReports("sp-probe-0", 1)[0].PID, f.waitReports("sp-probe-1", 1)[0].PID}

	start := time.Now()
	done, err := d.Remove(t.Context(), w)
	must(t, err)
	if done {
		t.Fatal("Remove reported done at once although the processes ignore SIGTERM")
	}
	waitRemoved(t, d, w)
	if took := time.Since(start); took < stopTimeout {
		t.Errorf("Remove finished after %v, before the stop timeout %v", took, stopTimeout)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d still alive after Remove", pid)
		}
	}
	entries, err := os.ReadDir(f.providerDir())
	must(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".log") {
			t.Errorf("Remove left %s behind", e.Name())
		}
	}
}

// TestBadWorkload checks that what the process deployer cannot run is a
// Failed init and a not-ready run with a clear message, not an error or a
// panic, and starts nothing.
func TestBadWorkload(t *testing.T) {
	cases := map[string]struct {
		reason string
		mod    func(*deploy.Workload)
		want   []string
	}{
		"UnmappedImage": {
			reason: "an image without a binary names the image and how to map it",
			mod:    func(w *deploy.Workload) { w.Image = "ghcr.io/acme/unknown:v2" },
			want:   []string{`image "ghcr.io/acme/unknown:v2" is not mapped to a local binary`, `"ghcr.io/acme/unknown:*"`},
		},
		"ValueFrom": {
			reason: "env from the downward API or Secrets cannot be resolved locally",
			mod: func(w *deploy.Workload) {
				w.Env = append(w.Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{Key: "token"},
				}})
			},
			want: []string{"env TOKEN uses valueFrom"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := t.TempDir()
			d, err := process.New(process.Config{
				StateDir: t.TempDir(),
				Images:   process.ImageMap{Images: []process.ImageMapping{{Image: "registry.example.com/marketplane/probe:*", Binary: "/bin/true"}}},
				Platform: &rest.Config{Host: "https://127.0.0.1:1"},
			}, process.WithTokenSource(process.TokenSourceFn(func(_ context.Context, _, _ string, _ time.Duration) (string, time.Time, error) {
				t.Error("a token was requested for a workload that cannot run")
				return "", time.Time{}, nil
			})))
			must(t, err)
			defer d.Close()
			w := (&fixture{outDir: out}).workload(tc.mod)
			st, err := d.Init(t.Context(), w)
			if err != nil {
				t.Fatalf("%s: Init returned an error instead of a status: %v", tc.reason, err)
			}
			if st.State != deploy.InitFailed || st.RetryAfter != 0 {
				t.Errorf("%s: Init got %+v, want Failed without a retry", tc.reason, st)
			}
			rs, err := d.Run(t.Context(), w)
			if err != nil {
				t.Fatalf("%s: Run returned an error instead of a status: %v", tc.reason, err)
			}
			for _, want := range tc.want {
				if !strings.Contains(st.Message, want) || !strings.Contains(rs.Message, want) {
					t.Errorf("%s: Init message %q / Run message %q, want them to contain %q", tc.reason, st.Message, rs.Message, want)
				}
			}
			if rs.Ready {
				t.Errorf("%s: Run ready", tc.reason)
			}
		})
	}
}

// TestTokenRefresh checks that the run token is replaced before it
// expires, without restarting the process, and that the kubeconfig keeps
// working.
func TestTokenRefresh(t *testing.T) {
	f := newFixture(t)
	clock := clocktesting.NewFakeClock(time.Now())
	const ttl = 10 * time.Minute
	d := f.deployer(process.WithClock(clock), process.WithTokenTTL(ttl))
	w := f.workload()
	initSucceeded(t, d, w)
	_, err := d.Run(t.Context(), w)
	must(t, err)
	before := f.waitReports("sp-probe-0", 1)[0]
	tokenPath := filepath.Join(f.providerDir(), "run.token")
	old, err := os.ReadFile(tokenPath)
	must(t, err)

	// The refresher waits for 80 % of the lifetime; step just past it.
	// Waiters: the refresher and the replica's ready-grace timer.
	poll(t, 10*time.Second, "the refresher to wait on the clock", func() (bool, error) { return clock.Waiters() >= 2, nil })
	clock.Step(ttl * 9 / 10)
	poll(t, 30*time.Second, "a new token", func() (bool, error) {
		cur, err := os.ReadFile(tokenPath)
		return err == nil && len(cur) > 0 && !bytes.Equal(cur, old), nil
	})

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(f.providerDir(), "run.kubeconfig"))
	must(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	res, err := cs.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	must(t, err)
	if got := res.Status.UserInfo.Username; got != saUser(f.ns, "sp-probe") {
		t.Errorf("refreshed kubeconfig authenticates as %q, want %q", got, saUser(f.ns, "sp-probe"))
	}
	if !alive(before.PID) || len(f.reports("sp-probe-0")) != 1 {
		t.Errorf("the run process was restarted for a token refresh")
	}
}
