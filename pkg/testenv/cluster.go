package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/pkg/apiserverprofile"
	"github.com/marketplane/marketplane/pkg/startslot"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// Client-side rate limits of the clients handed out. Tests create many
// objects quickly; the library defaults (5 QPS) would make them crawl.
const (
	clientQPS   = 500
	clientBurst = 1000
)

// DefaultControllers are the kube-controller-manager controllers started by
// WithControllerManager when it is given none: enough for namespace deletion
// and owner-reference garbage collection to behave as in a real cluster and
// for the aggregated admin/edit/view ClusterRoles to have rules and for
// service-account token Secrets to be filled in,
// without controllers (jobs, deployments) that would race tests which play
// the role of a kubelet.
var DefaultControllers = []string{"namespace", "garbagecollector", "serviceaccount", "serviceaccount-token", "clusterrole-aggregation"}

// Cluster is one running API server with clients for it.
type Cluster struct {
	// Name identifies the cluster in messages, e.g. "platform".
	Name string
	// Config is an admin (system:masters) REST config for the API server.
	Config *rest.Config
	// Client is an uncached admin client using Scheme.
	Client client.Client
	// Scheme holds the built-in, apiextensions and Marketplane types.
	Scheme *runtime.Scheme
	// Kubeconfig is an admin kubeconfig for the API server.
	Kubeconfig []byte
	// Dir is a scratch directory removed when the cluster stops; it holds
	// the kubeconfig file, the API server's certificates and keys, and the
	// kube-controller-manager log.
	Dir string

	env     *envtest.Environment
	apiMu   sync.Mutex // serialises StopAPIServer and StartAPIServer
	apiDown bool       // the API server was stopped by StopAPIServer
	kcm     *exec.Cmd
	kcmDone chan struct{}
	// kcmStopping is set by Stop, so that an exit before it is written
	// to the controller manager's log.
	kcmStopping atomic.Bool
	stopOnce    sync.Once
	stopErr     error
}

// Option configures a Cluster before it starts.
type Option func(*options)

type options struct {
	name        string
	crds        []*apiextensionsv1.CustomResourceDefinition
	crdsSet     bool
	controllers []string
	// apiServerArgs are extra kube-apiserver flags (WithAPIServerArgs).
	apiServerArgs []string
	// fullAPI: the API server serves every API group (WithFullAPI).
	fullAPI bool
}

// WithName names the cluster (for messages and the scratch directory).
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithCRDs replaces the default CRD set (every CRD in api/crds) with crds.
// WithCRDs() with no arguments installs none.
func WithCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) Option {
	return func(o *options) { o.crds, o.crdsSet = crds, true }
}

// WithFullAPI makes the cluster's API server serve every built-in API group
// and run every default admission plugin and API Priority and Fairness, as
// a production cluster does. Without it a cluster runs the small profile of
// the local landscape's provisioned clusters (pkg/apiserverprofile):
// the core, apps, batch, policy, RBAC, apiextensions, coordination,
// authentication, authorization, admissionregistration, events, discovery
// and networking groups; the groups of storage, scheduling, autoscaling,
// certificates, nodes, dynamic resources and flow control are not served.
// That costs each start less CPU, which a suite starting a hundred API
// servers on a small machine notices.
func WithFullAPI() Option { return func(o *options) { o.fullAPI = true } }

// WithControllerManager attaches a kube-controller-manager running the given
// controllers, or DefaultControllers when none are given.
func WithControllerManager(controllers ...string) Option {
	return func(o *options) {
		if len(controllers) == 0 {
			controllers = DefaultControllers
		}
		o.controllers = controllers
	}
}

// New starts a cluster. The caller must call Stop. Tests should prefer Start,
// which stops the cluster when the test ends.
func New(opts ...Option) (*Cluster, error) {
	o := options{name: "cluster"}
	for _, opt := range opts {
		opt(&o)
	}
	binDir, err := BinaryDir()
	if err != nil {
		return nil, err
	}
	scheme, err := install.NewScheme()
	if err != nil {
		return nil, err
	}
	if !o.crdsSet {
		if o.crds, err = crds.All(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "marketplane-"+o.name+"-")
	if err != nil {
		return nil, fmt.Errorf("create scratch directory: %w", err)
	}
	c := &Cluster{Name: o.name, Scheme: scheme, Dir: dir}
	certDir := apiServerCertDir(dir)
	if err := os.Mkdir(certDir, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("create API server certificate directory: %w", err)
	}
	apiServerArgs := o.apiServerArgs
	if !o.fullAPI {
		apiServerArgs = append(apiserverprofile.Args(), apiServerArgs...)
	}
	if c.env, err = startEnvironment(o.name, certDir, binDir, scheme, o.crds, apiServerArgs); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c.Config = rest.CopyConfig(c.env.Config)
	c.Config.QPS, c.Config.Burst = clientQPS, clientBurst
	c.Kubeconfig = c.env.KubeConfig
	if c.Client, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("client for %q: %w", o.name, err)
	}
	if len(o.controllers) > 0 {
		if err := c.startControllerManager(filepath.Join(binDir, "kube-controller-manager"), o.controllers); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// startAttempts bounds how often New starts a fresh etcd and API server
// when one fails to start.
const startAttempts = 3

// configureAttempt, when set (by tests of this package), adjusts the API
// server of each start attempt before it starts.
var configureAttempt func(attempt int, apiServer *envtest.APIServer)

// startEnvironment starts etcd and an API server serving certDir's
// certificates, with crds installed. envtest retries a failed start on the
// ports it picked the first time, so a port another process took between
// envtest's check and the API server's bind (the ephemeral range is shared
// with every outbound connection of a loaded test run) fails all of its
// retries; each attempt here starts with newly picked ports. A failure
// carries the tail of the API server's output. apiServerArgs are extra
// kube-apiserver flags (WithAPIServerArgs).
func startEnvironment(name, certDir, binDir string, scheme *runtime.Scheme, crds []*apiextensionsv1.CustomResourceDefinition, apiServerArgs []string) (*envtest.Environment, error) {
	var errs []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		apiServer := &envtest.APIServer{CertDir: certDir}
		// Without a grace period for watches, kube-apiserver's graceful
		// shutdown waits for every open watch until its request timeout (a
		// minute): one informer made StopAPIServer run into envtest's stop
		// timeout, be killed, and stay "up". With it, the API server ends
		// the watches and stops in about a second.
		apiServer.Configure().Set("shutdown-watch-termination-grace-period", "2s")
		addAPIServerArgs(apiServer, apiServerArgs)
		output := &tailWriter{max: 2048}
		apiServer.Err = output
		if configureAttempt != nil {
			configureAttempt(attempt, apiServer)
		}
		env := &envtest.Environment{
			// A CertDir of our own survives StopAPIServer, so that
			// StartAPIServer serves the same certificates.
			ControlPlane:             envtest.ControlPlane{APIServer: apiServer},
			BinaryAssetsDirectory:    binDir,
			Scheme:                   scheme,
			CRDs:                     crds,
			ErrorIfCRDPathMissing:    true,
			ControlPlaneStartTimeout: time.Minute,
			ControlPlaneStopTimeout:  30 * time.Second,
		}
		err := startWithSlot(env)
		// Once started, the API server's output goes nowhere, as before.
		output.stop()
		if err == nil {
			return env, nil
		}
		// envtest may have started some processes before it failed.
		_ = env.Stop()
		// envtest writes a CA and serving certificate into an empty
		// CertDir only, and keeps the CA in the APIServer object of this
		// attempt: the next one starts from an empty directory again.
		if err := emptyDir(certDir); err != nil {
			return nil, fmt.Errorf("start API server %q: %w", name, err)
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w; API server output ends: %s", attempt, err, output.String()))
	}
	return nil, fmt.Errorf("start API server %q: %w", name, errors.Join(errs...))
}

// slotWait bounds how long a start waits for a start slot
// (pkg/startslot): the starts ahead of it each end within envtest's
// start timeout.
const slotWait = 10 * time.Minute

// startWithSlot starts env while holding a start slot, so that envtest's
// start timeout counts from the slot on.
func startWithSlot(env *envtest.Environment) error {
	ctx, cancel := context.WithTimeout(context.Background(), slotWait)
	defer cancel()
	release, err := startslot.Acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	_, err = env.Start()
	return err
}

// emptyDir removes everything in dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("empty %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("empty %s: %w", dir, err)
		}
	}
	return nil
}

// tailWriter keeps the last max bytes written to it until stop is called,
// and drops everything after.
type tailWriter struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	stopped bool
}

// Write keeps the tail of p; it never fails, so that the writer never
// blocks the process whose output it takes.
func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped, w.buf = true, append([]byte(nil), w.buf...)
}

// String returns the kept tail, or "(nothing)".
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) == 0 {
		return "(nothing)"
	}
	return strings.TrimSpace(string(w.buf))
}

// Start starts a cluster for a test and stops it when the test ends. It fails
// the test when the cluster cannot start, and skips it under -short.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	SkipIfShort(t)
	c, err := New(opts...)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("testenv: stop %q: %v", c.Name, err)
		}
	})
	return c
}

// NewMany starts one cluster per entry of specs concurrently, each with its
// options plus WithName(name). If any fails to start, it stops the ones that
// did and returns the errors of all that failed. The caller stops the
// clusters; tests should prefer StartMany.
func NewMany(specs map[string][]Option) (map[string]*Cluster, error) {
	out := make(map[string]*Cluster, len(specs))
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, opts := range specs {
		wg.Go(func() {
			c, err := New(append(append([]Option{}, opts...), WithName(name))...)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[name] = c
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range out {
			_ = c.Stop()
		}
		return nil, err
	}
	return out, nil
}

// StartMany starts one cluster per name concurrently, each with opts, and
// stops them all when the test ends. It skips the test under -short.
func StartMany(t testing.TB, names []string, opts ...Option) map[string]*Cluster {
	t.Helper()
	SkipIfShort(t)
	specs := make(map[string][]Option, len(names))
	for _, name := range names {
		specs[name] = opts
	}
	out, err := NewMany(specs)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		for _, c := range out {
			if err := c.Stop(); err != nil {
				t.Errorf("testenv: stop %q: %v", c.Name, err)
			}
		}
	})
	return out
}

// KubeconfigPath writes the admin kubeconfig into the scratch directory (once)
// and returns its path, for processes that take a --kubeconfig flag.
func (c *Cluster) KubeconfigPath() (string, error) {
	p := filepath.Join(c.Dir, "kubeconfig")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.WriteFile(p, c.Kubeconfig, 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig of %q: %w", c.Name, err)
	}
	return p, nil
}

// Stop stops the controller manager, the API server and etcd, and removes the
// scratch directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if c.kcm != nil && c.kcm.Process != nil {
			c.kcmStopping.Store(true)
			_ = c.kcm.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.kcmDone:
			case <-time.After(10 * time.Second):
				_ = c.kcm.Process.Kill()
				<-c.kcmDone
			}
		}
		if c.env != nil {
			if err := c.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop API server: %w", err))
			}
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove scratch directory: %w", err))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

func (c *Cluster) startControllerManager(path string, controllers []string) error {
	kubeconfig, err := c.KubeconfigPath()
	if err != nil {
		return err
	}
	logPath := filepath.Join(c.Dir, "kube-controller-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("create controller-manager log: %w", err)
	}
	// The token controller signs with the API server's service-account
	// key and puts the API server's CA into token Secrets.
	rootCA := filepath.Join(c.Dir, "root-ca.crt")
	if err := os.WriteFile(rootCA, c.Config.CAData, 0o600); err != nil {
		return fmt.Errorf("write root CA for kube-controller-manager: %w", err)
	}
	saKey := filepath.Join(c.env.ControlPlane.APIServer.CertDir, "sa-signer.key")
	cmd := exec.Command(path,
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file="+saKey,
		"--root-ca-file="+rootCA,
		"--v=1",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The controller manager must not outlive a test binary that crashes
	// (on Linux StartCmd gives it Pdeathsig; other systems have none, see
	// pkg/supervisor), nor die before its cluster: StartCmd forks
	// from a thread that lasts, where a plain Start could fork from one
	// that a closing Spawner of a parallel test ends.
	if err := supervisor.StartCmd(cmd); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start kube-controller-manager for %q: %w", c.Name, err)
	}
	c.kcm, c.kcmDone = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait() // the outcome is in ProcessState
		if !c.kcmStopping.Load() {
			// Namespaces stop being deleted from now on; the log says why.
			fmt.Fprintf(logFile, "--- %s kube-controller-manager ended before its cluster was stopped: %s\n", time.Now().UTC().Format(time.RFC3339), cmd.ProcessState)
		}
		_ = logFile.Close()
		close(c.kcmDone)
	}()
	// A bad flag or an unreachable API server makes it exit at once; report
	// that here rather than as a mysterious timeout in the test.
	select {
	case <-c.kcmDone:
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("kube-controller-manager for %q exited at start: %s", c.Name, tail(out, 2000))
	case <-time.After(time.Second):
		return nil
	}
}

// ControllerManagerLog returns the kube-controller-manager output so far, for
// failure messages.
func (c *Cluster) ControllerManagerLog() string {
	out, err := os.ReadFile(filepath.Join(c.Dir, "kube-controller-manager.log"))
	if err != nil {
		return ""
	}
	return string(out)
}

func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
