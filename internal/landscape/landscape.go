package landscape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/localcluster"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// Defaults and names of a landscape.
const (
	// DefaultStateDir is the state directory of `marketplane landscape`.
	DefaultStateDir = ".landscape"
	// Namespace is the operator's namespace on the platform cluster; it
	// holds the Clusters of the landscape and their kubeconfig Secrets.
	Namespace = "marketplane-system"
	// DefaultEnvironment is passed to the operator and to providers as
	// --environment.
	DefaultEnvironment = "local"
	// DefaultStartTimeout bounds the start of each part (etcd, a cluster,
	// the operator's first checks, a step).
	DefaultStartTimeout = 3 * time.Minute
	// DefaultStopTimeout is the wait between SIGTERM and SIGKILL of a
	// process, and for the operator to stop.
	DefaultStopTimeout = 10 * time.Second
	// DefaultOperatorLease is the lease of the operator replicas' leader
	// election on a landscape: three times the operator's default (see
	// Config.OperatorLease).
	DefaultOperatorLease = 30 * time.Second
)

// The landscape's own clusters.
const (
	ClusterPlatform   = "platform"
	ClusterOnboarding = "onboarding"
	ClusterWorkload   = "workload"
)

// Provider images of the landscape: a provider whose ServiceProvider names
// Image(b) runs bin/<b> (see WriteImageMap).
const (
	ImageRegistry = "marketplane.local"
	ImageTag      = "dev"
)

// Image returns the image that stands for the binary bin/<binary>, e.g.
// marketplane.local/marketplane-interoperator:dev.
func Image(binary string) string { return ImageRegistry + "/" + binary + ":" + ImageTag }

// Config configures a Landscape.
type Config struct {
	// StateDir is the state directory (DefaultStateDir when empty).
	StateDir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and the
	// provider binaries (default: see controlplane.BinDir).
	BinDir string
	// Out receives progress lines and the summary (default: discarded).
	Out io.Writer
	// Environment is the operator's --environment (DefaultEnvironment).
	Environment string
	// Images are image map entries besides those WriteImageMap writes for
	// the binaries in BinDir (an image may be mapped only once), e.g. from
	// UserImages. When empty, a resumed landscape keeps the entries of its
	// earlier run.
	Images []process.ImageMapping
	// StartTimeout and StopTimeout override DefaultStartTimeout and
	// DefaultStopTimeout.
	StartTimeout, StopTimeout time.Duration
	// OperatorLease is the operator replicas' leader-election lease
	// (DefaultOperatorLease); they renew it every 2 s and give up 3 s
	// before it ends. A leader that cannot renew in time exits and takes
	// every provider with it (the process deployer's providers die with
	// their operator): a lease longer than a loaded machine's slowest
	// answer keeps a busy landscape from starting them all over and over,
	// at the price of a slower takeover after a leader died. 10 s gives
	// the operator's own defaults (renew deadline 7 s, retry 2 s).
	OperatorLease time.Duration
	// Detached says that the landscape runs in the background (started by
	// `landscape up` without --foreground); it only changes the hints of
	// the summary.
	Detached bool
	// MCPBackend is what serves the MCPs' clusters: BackendAPIServer or
	// BackendKCP. Empty keeps the one a resumed landscape recorded
	// (BackendAPIServer for a new one); a resumed landscape refuses
	// another.
	MCPBackend string
}

// StepFunc is a step of the start, run after the operator is up; it gets
// the landscape with its clusters. A step that starts something that must
// be stopped registers that with OnStop, Go or StartProcess.
type StepFunc func(ctx context.Context, l *Landscape) error

// Cluster is one of the landscape's clusters, with admin access.
type Cluster struct {
	// Name is the cluster's name (ClusterPlatform, ...).
	Name string
	// KubeconfigPath and Kubeconfig are its admin kubeconfig.
	KubeconfigPath string
	Kubeconfig     []byte
	// Config is an admin REST config.
	Config *rest.Config
	// Client is an uncached admin client with every Marketplane type.
	Client client.Client
}

// Landscape is a local landscape. Create it with New, add steps, then Start
// (or Run) it once.
type Landscape struct {
	// Layout is the state directory.
	Layout controlplane.Layout
	// Binaries are the control plane's executables; Binaries.Dir is where
	// provider binaries are looked for too.
	Binaries controlplane.Binaries
	// Platform, Onboarding and Workload are set once Start has started
	// them, before the steps run.
	Platform, Onboarding, Workload *Cluster

	cfg     Config
	out     io.Writer
	log     logr.Logger
	logFile *os.File
	steps   []namedStep
	summary []string

	lock        *os.File
	store       *controlplane.Store
	cp          *controlplane.ControlPlane
	provisioner *localcluster.Provisioner
	operator    *operator
	// backend is the MCPs' backend; kcp runs for BackendKCP.
	backend string
	kcp     *controlplane.Proc

	runCtx    context.Context
	runCancel context.CancelFunc
	bg        sync.WaitGroup
	failed    chan error
	failOnce  sync.Once

	mu       sync.Mutex
	stops    []namedStop
	procs    []*controlplane.Proc
	started  bool
	stopErr  error
	stopOnce sync.Once
}

type namedStep struct {
	name string
	fn   StepFunc
}

type namedStop struct {
	name string
	fn   func(ctx context.Context) error
}

// New returns a landscape for cfg. It checks the binaries and prepares the
// state directory (creating it, or refusing a non-empty directory that is
// not a landscape's) but starts nothing.
func New(cfg Config) (*Landscape, error) {
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.Environment == "" {
		cfg.Environment = DefaultEnvironment
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.OperatorLease <= 0 {
		cfg.OperatorLease = DefaultOperatorLease
	}
	if cfg.OperatorLease <= minOperatorLease {
		return nil, fmt.Errorf("the operator's lease of %s is too short: it is renewed every %s and given up %s before it ends; give more than %s",
			cfg.OperatorLease, operatorRetryPeriod, operatorRenewMargin, minOperatorLease)
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	binDir, err := controlplane.BinDir(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	bins, err := controlplane.FindBinaries(binDir)
	if err != nil {
		return nil, err
	}
	if err := operatorBinary(bins.Dir); err != nil {
		return nil, err
	}
	if cfg.MCPBackend != "" {
		if cfg.MCPBackend, err = ParseMCPBackend(cfg.MCPBackend); err != nil {
			return nil, err
		}
	}
	if cfg.MCPBackend == BackendKCP {
		if err := kcpBinaries(bins.Dir); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", cfg.StateDir, err)
	}
	layout := controlplane.Layout{Dir: dir}
	if err := prepareStateDir(layout); err != nil {
		return nil, err
	}
	log, logFile, err := fileLogger(layout.Log(LogName))
	if err != nil {
		return nil, err
	}
	return &Landscape{
		Layout:   layout,
		Binaries: bins,
		cfg:      cfg,
		out:      out,
		log:      log,
		logFile:  logFile,
		failed:   make(chan error, 1),
	}, nil
}

// LogName is the landscape's own log, logs/landscape.log: its progress,
// process exits and restarts, and what its steps' controllers log. The
// operator replicas log to logs/operator-<i>.log.
const LogName = "landscape"

// Logger is the logger of the landscape's own controllers, writing JSON
// lines to logs/landscape.log. A command may make it the process-wide
// logger of controller-runtime and klog.
func (l *Landscape) Logger() logr.Logger { return l.log }

// StartTimeout is how long each part of the start may take (the
// --start-timeout of `landscape up`): steps added with AddStep wait as
// long for what they start.
func (l *Landscape) StartTimeout() time.Duration { return l.cfg.StartTimeout }

// AddStep adds a step run, in the order added, after the operator is up
// and before the landscape reports ready. Call it before Start.
func (l *Landscape) AddStep(name string, fn StepFunc) {
	l.steps = append(l.steps, namedStep{name: name, fn: fn})
}

// AddSummary adds lines to the summary printed when the landscape is
// ready (after the kubeconfigs, before the next commands).
func (l *Landscape) AddSummary(lines ...string) { l.summary = append(l.summary, lines...) }

// OnStop registers fn to run when the landscape stops, before the operator
// stops; functions run in the reverse order of registration.
func (l *Landscape) OnStop(name string, fn func(ctx context.Context) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stops = append(l.stops, namedStop{name: name, fn: fn})
}

// Go runs fn in the background until the landscape stops (its context is
// cancelled then, before the operator stops, and Stop waits for it). An
// error fn returns before that fails the landscape: Wait returns it. Call
// it from a step.
func (l *Landscape) Go(name string, fn func(ctx context.Context) error) {
	l.bg.Go(func() {
		if err := fn(l.runCtx); err != nil && l.runCtx.Err() == nil {
			l.fail(fmt.Errorf("%s: %w", name, err))
		}
	})
}

// StartProcess starts binary with args as a process of the landscape: its
// output goes to logs/<name>.log, it is recorded in state.json (so that
// down stops it too), it dies with the landscape, and it is stopped when
// the landscape stops, before the operator. When it exits on its own, it
// is restarted with the same arguments after a backoff, like the control
// plane's processes. Call it from a step.
func (l *Landscape) StartProcess(name, binary string, args []string) (*controlplane.Proc, error) {
	p, err := l.startRecorded(name, binary, args)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	return p, nil
}

// startRecorded starts a restarting process of the landscape and records
// it in state.json.
func (l *Landscape) startRecorded(name, binary string, args []string) (*controlplane.Proc, error) {
	p, err := l.cp.Runner().Start(name, binary, args, l.Layout.Log(name))
	if err != nil {
		return nil, err
	}
	if err := l.store.Update(func(s *controlplane.State) error {
		if s.Processes == nil {
			s.Processes = map[string]*controlplane.Process{}
		}
		rec := p.Record // a copy: the Runner updates the stored one on restarts
		s.Processes[name] = &rec
		return nil
	}); err != nil {
		p.Stop(l.cfg.StopTimeout)
		return nil, err
	}
	return p, nil
}

// SetEndpoint records an address the landscape serves (e.g. "broker" →
// its URL) in state.json, shown by status.
func (l *Landscape) SetEndpoint(name, url string) error {
	return l.store.Update(func(s *controlplane.State) error {
		if s.Endpoints == nil {
			s.Endpoints = map[string]string{}
		}
		s.Endpoints[name] = url
		return nil
	})
}

// ControlPlane returns the control plane once Start has begun.
func (l *Landscape) ControlPlane() *controlplane.ControlPlane { return l.cp }

// State returns a copy of the landscape's record.
func (l *Landscape) State() *controlplane.State { return l.store.Snapshot() }

// progressf prints a progress line.
func (l *Landscape) progressf(format string, args ...any) {
	fmt.Fprintf(l.out, "• "+format+"\n", args...)
}

// fail records the first failure of a running landscape.
func (l *Landscape) fail(err error) {
	l.failOnce.Do(func() { l.failed <- err })
}

// Run starts the landscape, waits until ctx ends or the landscape fails,
// and stops it. It returns the failure, if any, joined with errors of the
// stop.
func (l *Landscape) Run(ctx context.Context) error {
	if err := l.Start(ctx); err != nil {
		return err
	}
	werr := l.Wait(ctx)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	fmt.Fprintln(l.out, "Stopping the landscape...")
	// Only a stop asked for (ctx ended) is recorded as on purpose; after
	// a failure, status says the landscape failed.
	serr := l.halt(stopCtx, werr == nil)
	if serr == nil && werr == nil {
		fmt.Fprintf(l.out, "Stopped. The data is kept in %s: 'marketplane landscape start' resumes it, 'marketplane landscape down' removes it.\n", l.Layout.Dir)
	}
	return errors.Join(werr, serr)
}

// Wait blocks until ctx ends (it then returns nil) or the landscape fails
// (the operator or a background function failed). A process of the
// landscape that exits does not fail it: it is restarted.
func (l *Landscape) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-l.failed:
		return err
	}
}

// Start starts the landscape and returns once it is ready; see the package
// documentation. When it fails, it stops what it started and returns the
// error.
func (l *Landscape) Start(ctx context.Context) (err error) {
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		return errors.New("landscape already started")
	}
	l.started = true
	l.mu.Unlock()
	begin := time.Now()
	l.runCtx, l.runCancel = context.WithCancel(context.WithoutCancel(ctx))

	if err := l.acquire(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			err = errors.Join(err, l.halt(stopCtx, false))
		}
	}()
	state, reused, err := l.recover()
	if err != nil {
		return err
	}
	if err := l.chooseBackend(state, reused); err != nil {
		return err
	}
	l.store = controlplane.NewStore(l.Layout.Dir, state)
	if err := l.store.Update(func(*controlplane.State) error { return nil }); err != nil {
		return err
	}
	l.cp = controlplane.New(l.Layout, l.Binaries, l.store,
		controlplane.WithStartTimeout(l.cfg.StartTimeout), controlplane.WithStopTimeout(l.cfg.StopTimeout),
		controlplane.WithProcessEvents(l.processEvent), controlplane.WithWorkloads(ClusterWorkload))
	if err := l.startBase(ctx); err != nil {
		return err
	}
	for _, s := range l.steps {
		l.progressf("%s", s.name)
		sctx, cancel := context.WithTimeout(ctx, l.cfg.StartTimeout)
		err := s.fn(sctx, l)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	elapsed := time.Since(begin)
	l.printSummary(elapsed, reused)
	now := time.Now()
	return l.store.Update(func(s *controlplane.State) error {
		s.Phase, s.ReadyAt = controlplane.PhaseReady, &now
		return nil
	})
}

// startBase starts what every landscape runs before its steps: etcd, the
// clusters, kcp for the kcp backend, the operator; it returns once the
// operator has reported the clusters (and the kcp provider) Ready.
func (l *Landscape) startBase(ctx context.Context) error {
	if err := l.cp.EnsurePKI(); err != nil {
		return err
	}
	if l.backend == BackendKCP {
		// First: it takes longest to become ready, and waits for nothing.
		l.progressf("starting kcp, which serves every MCP as a workspace")
		if err := l.startKCP(); err != nil {
			return err
		}
	}

	l.progressf("starting etcd")
	if err := l.cp.StartEtcd(ctx); err != nil {
		return err
	}
	l.progressf("starting kube-apiserver and kube-controller-manager for %s, %s, %s (and kube-scheduler, kwok and %d simulated nodes for %s)",
		ClusterPlatform, ClusterOnboarding, ClusterWorkload, controlplane.SimulatedNodes, ClusterWorkload)
	if err := l.startClusters(ctx); err != nil {
		return err
	}
	l.progressf("registering the %s and %s clusters on the %s cluster", ClusterOnboarding, ClusterWorkload, ClusterPlatform)
	if err := l.registerClusters(ctx); err != nil {
		return err
	}
	if l.backend == BackendKCP {
		// Before the operator: the provider it deploys reads the
		// kubeconfig waitKCP writes.
		l.progressf("waiting for kcp; registering the ClusterProvider %s and the ClusterProfile %s", KCPProvider, KCPProfile)
		if err := l.waitKCP(ctx); err != nil {
			return err
		}
		if err := l.registerKCP(ctx); err != nil {
			return err
		}
	}
	l.provisioner = localcluster.New(l.cp, l.Platform.Client, Namespace)
	if n := len(provisioned(l.store.Snapshot())); n > 0 {
		l.progressf("restarting %d cluster(s) provisioned earlier", n)
		if err := l.provisioner.Restore(ctx); err != nil {
			return err
		}
	}
	l.progressf("starting the operator (process deployer, local cluster provider)")
	if err := l.startOperator(); err != nil {
		return err
	}
	if err := l.waitClustersReady(ctx); err != nil {
		return err
	}
	if l.backend == BackendKCP {
		if err := l.waitKCPProvider(ctx); err != nil {
			return err
		}
	}
	return nil
}

// startClusters starts the three clusters of the landscape in parallel and
// makes admin clients for them.
func (l *Landscape) startClusters(ctx context.Context) error {
	scheme, err := install.NewScheme()
	if err != nil {
		return err
	}
	names := []string{ClusterPlatform, ClusterOnboarding, ClusterWorkload}
	out := make([]*Cluster, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			rc, err := l.cp.StartCluster(gctx, name)
			if err != nil {
				return fmt.Errorf("start cluster %s: %w", name, err)
			}
			c, err := client.New(rc.Config, client.Options{Scheme: scheme})
			if err != nil {
				return fmt.Errorf("client for cluster %s: %w", name, err)
			}
			out[i] = &Cluster{Name: name, KubeconfigPath: rc.KubeconfigPath, Kubeconfig: rc.Kubeconfig, Config: rc.Config, Client: c}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	l.Platform, l.Onboarding, l.Workload = out[0], out[1], out[2]
	return l.store.Update(func(s *controlplane.State) error {
		for _, name := range names {
			s.Clusters[name].Phase = controlplane.ClusterRunning
		}
		return nil
	})
}

// processEvent reports an exit or a restart of a process of the landscape
// in its log and progress output; state.json has it already.
func (l *Landscape) processEvent(e controlplane.ProcessEvent) {
	log := l.log.WithValues("process", e.Name, "restarts", e.Restarts)
	switch e.Kind {
	case supervisor.EventExited:
		log.Info("A process of the landscape exited; restarting it", "exit", e.Record.LastExit, "pid", e.Process.PID,
			"in", e.Wait.String(), "output", e.Process.OutputTail(5, 500))
		l.progressf("%s (pid %d) %s; restarting it in %s (restarts so far: %d)", e.Name, e.Process.PID, e.Record.LastExit, e.Wait, e.Restarts)
	case supervisor.EventRestartFailed:
		log.Error(e.Err, "Restarting a process of the landscape failed; trying again", "in", e.Wait.String())
		l.progressf("restarting %s failed, trying again in %s: %v", e.Name, e.Wait, e.Err)
	case supervisor.EventRestarted:
		log.Info("Restarted a process of the landscape", "pid", e.Record.PID)
		l.progressf("restarted %s (pid %d, restart %d)", e.Name, e.Record.PID, e.Restarts)
	}
}

// Stop stops the landscape in order: background functions and stop
// functions of the steps, processes the steps started, the operator (and
// the providers its process deployer runs), clusters being provisioned,
// then the control plane (provisioned clusters, the landscape's clusters,
// etcd). The data stays, and the state records the stop as on purpose
// (State.StoppedAt). It is safe to call more than once.
func (l *Landscape) Stop(ctx context.Context) error { return l.halt(ctx, true) }

// halt stops the landscape once; onPurpose records the stop in
// State.StoppedAt (a failed start or run leaves it unset).
func (l *Landscape) halt(ctx context.Context, onPurpose bool) error {
	l.stopOnce.Do(func() { l.stopErr = l.stop(ctx, onPurpose) })
	return l.stopErr
}

func (l *Landscape) stop(ctx context.Context, onPurpose bool) error {
	var errs []error
	if l.store != nil {
		errs = append(errs, l.store.Update(func(s *controlplane.State) error { s.Phase = controlplane.PhaseStopping; return nil }))
	}
	if l.runCancel != nil {
		l.runCancel()
	}
	l.bg.Wait()
	l.mu.Lock()
	stops, procs := slices.Clone(l.stops), slices.Clone(l.procs)
	l.mu.Unlock()
	for _, s := range slices.Backward(stops) {
		if err := s.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", s.name, err))
		}
	}
	for _, p := range slices.Backward(procs) {
		p.Stop(l.cfg.StopTimeout)
	}
	if l.operator != nil {
		errs = append(errs, l.operator.stop(l.cfg.StopTimeout))
	}
	// After the operator: the kcp provider it ran is gone.
	errs = append(errs, l.stopKCP())
	if l.store != nil && (len(procs) > 0 || l.operator != nil) {
		errs = append(errs, l.store.Update(func(s *controlplane.State) error { s.Processes = nil; return nil }))
	}
	if l.provisioner != nil {
		l.provisioner.Close()
	}
	if l.cp != nil {
		errs = append(errs, l.cp.Stop())
		l.cp.Close()
	}
	if l.store != nil {
		errs = append(errs, l.store.Update(func(s *controlplane.State) error {
			s.Phase, s.Supervisor, s.StoppedAt = controlplane.PhaseStopped, nil, nil
			if onPurpose {
				now := time.Now()
				s.StoppedAt = &now
			}
			return nil
		}))
	}
	l.release()
	if l.logFile != nil {
		_ = l.logFile.Sync()
	}
	return errors.Join(errs...)
}

// provisioned returns the records of clusters the local cluster provider
// created.
func provisioned(s *controlplane.State) []*controlplane.Cluster {
	var out []*controlplane.Cluster
	for _, c := range s.Clusters {
		if c.Request != nil {
			out = append(out, c)
		}
	}
	return out
}
