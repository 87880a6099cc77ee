package process_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The API server and the probe binary are shared by the package's tests and
// started on first use, so that unit tests run without them.
var (
	shared struct {
		once     sync.Once
		err      error
		dir      string
		probe    string
		platform *testenv.Cluster
	}
)

func TestMain(m *testing.M) {
	if os.Getenv(operatorHelperEnv) != "" {
		fmt.Fprintln(os.Stderr, "helper:", runOperatorHelper())
		os.Exit(1)
	}
	code := m.Run()
	if shared.platform != nil {
		if err := shared.platform.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop platform API server:", err)
		}
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// setup builds the contract probe and starts the platform API server once,
// both at the same time. It skips the test under -short.
func setup(t *testing.T) (probe string, platform *testenv.Cluster) {
	t.Helper()
	testenv.SkipIfShort(t)
	shared.once.Do(func() { shared.err = startShared() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.probe, shared.platform
}

// startShared fills shared. Its directory is not a test's t.TempDir: it
// outlives the test that happens to start it and is removed by TestMain.
func startShared() error {
	var err error
	if shared.dir, err = os.MkdirTemp("", "process-deployer-"); err != nil {
		return fmt.Errorf("shared directory: %w", err)
	}
	shared.probe = filepath.Join(shared.dir, "contractprobe")
	built := make(chan error, 1)
	go func() {
		built <- testenv.Build(shared.dir, "github.com/marketplane/marketplane/internal/operator/deploy/process/internal/contractprobe")
	}()
	shared.platform, err = testenv.New(testenv.WithName("platform"), testenv.WithCRDs())
	return errors.Join(err, <-built)
}

// probeImage is the image the tests map to the probe (as repo:*).
const probeImage = "registry.example.com/marketplane/probe:v1.0.0"

// contractArgs are the contract arguments the tests pass.
var contractArgs = []string{"--environment=test", "--provider-name=probe", "--verbosity=INFO"}

// fixture is one test's namespace, service accounts and directories.
type fixture struct {
	t        *testing.T
	probe    string
	platform *testenv.Cluster
	ns       string
	stateDir string
	outDir   string
}

var (
	nonName  = regexp.MustCompile(`[^a-z0-9]+`)
	fixtures atomic.Int32
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	probe, platform := setup(t)
	ns := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(ns) > 40 {
		ns = strings.TrimRight(ns[:40], "-")
	}
	// Unique also when tests run more than once (-count) on the shared
	// API server.
	ns = fmt.Sprintf("sp-%s-%d", ns, fixtures.Add(1))
	f := &fixture{t: t, probe: probe, platform: platform, ns: ns, stateDir: t.TempDir(), outDir: t.TempDir()}
	ctx := t.Context()
	must(t, platform.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}))
	for _, sa := range []string{"sp-probe-init", "sp-probe"} {
		must(t, platform.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sa}}))
	}
	return f
}

// workload is a ServiceProvider "probe" at generation 1 in f's namespace.
func (f *fixture) workload(mods ...func(*deploy.Workload)) *deploy.Workload {
	w := &deploy.Workload{
		Kind:               "ServiceProvider",
		Name:               "probe",
		Owner:              metav1.OwnerReference{APIVersion: "openmcp.cloud/v1alpha1", Kind: "ServiceProvider", Name: "probe", UID: "uid-1"},
		Generation:         1,
		Namespace:          f.ns,
		InitName:           "sp-probe-init",
		RunName:            "sp-probe",
		InitServiceAccount: "sp-probe-init",
		RunServiceAccount:  "sp-probe",
		Image:              probeImage,
		InitCommand:        []string{"init"},
		RunCommand:         []string{"run"},
		Args:               append([]string{}, contractArgs...),
		Env: []corev1.EnvVar{
			{Name: "PROBE_OUT", Value: f.outDir},
			{Name: "GREETING", Value: "hello"},
		},
		Replicas: 1,
	}
	for _, m := range mods {
		m(w)
	}
	return w
}

// deployer returns a Deployer on f's state directory, closed at the end.
func (f *fixture) deployer(opts ...process.Option) *process.Deployer {
	f.t.Helper()
	d, err := process.New(process.Config{
		StateDir: f.stateDir,
		Images:   process.ImageMap{Images: []process.ImageMapping{{Image: "registry.example.com/marketplane/probe:*", Binary: f.probe}}},
		Platform: f.platform.Config,
	}, opts...)
	must(f.t, err)
	f.t.Cleanup(func() {
		if err := d.Close(); err != nil {
			f.t.Errorf("close deployer: %v", err)
		}
	})
	return d
}

// providerDir is the provider's directory in the state directory.
func (f *fixture) providerDir() string { return filepath.Join(f.stateDir, "serviceprovider-probe") }

// report is what the contract probe writes.
type report struct {
	Subcommand string            `json:"subcommand"`
	Args       []string          `json:"args"`
	Env        map[string]string `json:"env"`
	PID        int               `json:"pid"`
	Username   string            `json:"username"`
	AuthError  string            `json:"authError"`
	// NamespaceFile is the content of the service-account namespace file
	// or "error: ...".
	NamespaceFile string `json:"namespaceFile"`
	// InClusterUser is the user of the in-cluster configuration, or the
	// reason it failed in InClusterError.
	InClusterUser  string `json:"inClusterUser"`
	InClusterError string `json:"inClusterError"`
}

// reports returns what processes named podName reported, oldest first.
func (f *fixture) reports(podName string) []report {
	f.t.Helper()
	files, err := filepath.Glob(filepath.Join(f.outDir, podName+".*.json"))
	must(f.t, err)
	var out []report
	for _, file := range files {
		data, err := os.ReadFile(file)
		must(f.t, err)
		var r report
		must(f.t, json.Unmarshal(data, &r))
		out = append(out, r)
	}
	return out
}

// waitReports waits until at least n processes named podName reported.
func (f *fixture) waitReports(podName string, n int) []report {
	f.t.Helper()
	var got []report
	poll(f.t, 30*time.Second, fmt.Sprintf("%d reports of %s", n, podName), func() (bool, error) {
		got = f.reports(podName)
		return len(got) >= n, nil
	})
	return got
}

// waitInit calls Init until it is neither running nor pending.
func waitInit(t *testing.T, d *process.Deployer, w *deploy.Workload) deploy.InitStatus {
	t.Helper()
	var st deploy.InitStatus
	poll(t, 30*time.Second, "init to finish", func() (bool, error) {
		var err error
		st, err = d.Init(t.Context(), w)
		return st.State != deploy.InitRunning && st.State != deploy.InitPending, err
	})
	return st
}

// initSucceeded runs init of w to success.
func initSucceeded(t *testing.T, d *process.Deployer, w *deploy.Workload) {
	t.Helper()
	if st := waitInit(t, d, w); st.State != deploy.InitSucceeded {
		t.Fatalf("init: got %+v, want state %s", st, deploy.InitSucceeded)
	}
}

// waitReady calls Run until it reports Ready.
func waitReady(t *testing.T, d *process.Deployer, w *deploy.Workload) deploy.RunStatus {
	t.Helper()
	var st deploy.RunStatus
	poll(t, 30*time.Second, "run to be ready", func() (bool, error) {
		var err error
		st, err = d.Run(t.Context(), w)
		return st.Ready, err
	})
	return st
}

// waitRemoved calls Remove until it reports done.
func waitRemoved(t *testing.T, d *process.Deployer, w *deploy.Workload) {
	t.Helper()
	poll(t, 30*time.Second, "remove to finish", func() (bool, error) {
		return d.Remove(t.Context(), w)
	})
}

func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// alive reports whether pid is a live process (a zombie counts as gone).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	if i := strings.LastIndex(s, ")"); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
