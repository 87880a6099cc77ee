// Command provisioning benchmarks the inter-operator's provisioner against
// real API servers (pkg/testenv): how fast it turns SFServiceInstances of
// a one-object plan into their ConfigMap and a succeeded state, how long
// one instance takes, and how many API writes an instance costs.
//
// It starts one API server (etcd + kube-apiserver) that plays the
// platform, onboarding and target cluster, so that the raw create rate it
// compares with is that of the very server the instances are written to
// (-servers 3 starts one per role; on a 2-core machine the three pairs
// compete for the same cores). It registers an SFCluster, an SFService and
// an SFPlan whose provision template renders one ConfigMap (no status
// template), and runs the inter-operator in-process (interoperator.Setup)
// with -concurrency instance reconciles at once. By default it measures
// the inter-operator as shipped: every client — the inter-operator's
// platform, onboarding and target clients and the benchmark's own — has
// the shipped client-side rate limits (providerapp.DefaultQPS, negative:
// no client-side limit, see docs/architecture.md "Client limits"). -qps
// and -burst set other limits for every client, for example -qps 50 to
// see the inter-operator throttled as it was before issue #15.
//
// Instances are created as the broker records a provision request: one
// create of the object with the broker's finalizer and last-operation
// label (no status write: an empty state means in_queue). A watch (not polling) sees each one reach
// succeeded. The phases, in order:
//
//  1. idle: -single instances one after another on an otherwise idle
//     system (after one warm-up instance), p50/p99 create→succeeded;
//  2. raw: -n ConfigMaps created by -workers goroutines with the same
//     client settings on the onboarding API server: the baseline creates/s;
//  3. load: -n instances created by -workers goroutines: instances/s from
//     the first create to the last succeeded, p50/p99 create→succeeded,
//     and the API writes of the phase from the API servers'
//     apiserver_request_total (POST, PUT, PATCH, APPLY, DELETE; every
//     response code), by resource, the benchmark's own (counted by its
//     client's transport) told apart from the provisioner's, events apart
//     from the provisioner's other writes.
//
// Then, with -broker (the default), the broker phase (broker.go:
// provision+bind and deprovision through the OSB broker) and its
// yardstick, the direct phase (direct.go).
//
// Latencies run from the moment the create request returned to the moment
// the watch delivered the succeeded state (creationTimestamp has a
// resolution of one second, too coarse for them). -cpuprofile profiles this
// process (inter-operator and benchmark) in the load phase,
// -apiserver-cpuprofile the onboarding kube-apiserver. -load N keeps N
// busy loops running from before the first phase to the end of the run
// (machineload.go); each phase's first line names the 1-minute load
// average at its start and end.
//
// Targets, measured against figures of the same run where they can be, so
// that the machine's load weighs on both sides:
//
//   - load-phase instances/s ≥ 0.2× the raw ConfigMap creates/s;
//   - kube-apiserver CPU time in the load phase ≤ 6 ms per instance (the
//     CPU time of the API server processes over the phase ÷ -n);
//   - ≤ 3 provisioner API writes per instance including its events (as the
//     inter-operator's TestWritesPerInstance counts; the figure without
//     events is printed too);
//   - idle create→succeeded p50 ≤ 10 ms and p99 ≤ 25 ms;
//   - the broker phase's: provision+bind instances/s ≥ 0.5× the same
//     work without the broker (the direct phase), deprovision of all -n ≤ 30 s with ≤ 5 writes and ≤ 3 reads
//     per instance (everyone's), sync provision p99 ≤ 100 ms.
//
// Each is printed with ok or MISSED, and the last line says whether all
// were met. With -strict a missed target makes the exit status 1.
//
// With -clusters N above 1 (multi-cluster mode, multicluster.go) it also
// starts N workload API servers. The idle and raw phases run as above;
// with -compare-single the single-cluster load phase follows (same -n,
// its own figures and targets). Then -registered SFClusters (default N;
// cluster-01, cluster-02, …, each with a kubeconfig Secret of its own)
// are registered round-robin on the N servers, the single-cluster
// SFCluster is cordoned, the ProviderConfig's spec.schedulerType is set
// to -scheduler (default least-filled), one warm-up instance per SFCluster
// starts each cluster's client, and the load phase creates -n instances
// without spec.clusterId, so that the scheduler places them. It prints the
// load figures and write table as above (the workload servers' writes
// included), the placements per SFCluster and their max-min, the
// ConfigMaps found on each workload server, the ratio to the raw create
// rate of the onboarding server (the raw phase measures only that
// server), the ratio to the single-cluster rate when -compare-single ran,
// and the peak RSS (VmHWM) of this process: the inter-operator and the
// benchmark's own clients, not etcd and kube-apiserver. Targets (issue
// #13): multi-cluster instances/s ≥ 0.5× the single-cluster instances/s
// (checked with -compare-single), peak RSS ≤ 300 MB (10^6 bytes) with 20
// registered SFClusters, for least-filled, label-selector and round-robin
// placements max-min ≤ 1, and issue #5's writes per instance in both
// load phases.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./bench/provisioning
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./bench/provisioning -load 2
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./bench/provisioning -clusters 3 -registered 20 -n 1000 -scheduler least-filled -compare-single
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/bench/internal/brokerobj"
	"github.com/marketplane/marketplane/bench/internal/parallel"
	"github.com/marketplane/marketplane/bench/internal/procstat"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/pkg/providerapp"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// Targets of the provisioner, each measured against a figure of the same
// run where it can be, so that a loaded machine does not decide them.
const (
	targetRawRatio     = 0.2                  // load-phase instances/s ÷ raw ConfigMap creates/s
	targetAPIServerCPU = 6 * time.Millisecond // kube-apiserver CPU per instance in the load phase
	targetWrites       = 3.0                  // provisioner writes per instance, events included
	targetIdleP50      = 10 * time.Millisecond
	targetIdleP99      = 25 * time.Millisecond
	apiserverProcess   = "kube-apiserver" // the API server's process name in /proc
	busyLoopsCPUName   = "busy loops (-load)"
)

// Names in the clusters.
const (
	providerName     = "interoperator"
	catalogNamespace = "interoperator"
	instanceNS       = "sf-instances"
	rawNS            = "raw-creates"
	clusterName      = "target"
	serviceID        = "0f4c9c1e-8a52-4f0e-b7a1-6d3e2c1b0a91"
	planID           = "7e2d4b6a-1c3f-4a5e-9b8d-2f0e1d3c5b7a"
)

// provisionTemplate renders one ConfigMap per instance.
const provisionTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "sf-%s" .instance.metadata.name }}
data:
  instanceId: {{ .instance.spec.instanceId | quote }}
  plan: {{ .plan.spec.name | quote }}
`

// config is what the flags set.
type config struct {
	n, single, workers, concurrency int
	qps                             float64
	burst                           int
	servers                         int
	timeout, settle                 time.Duration
	cpuprofile, apiserverProfile    string
	profilePhase                    string
	strict, verbose                 bool

	// clusters is the number of workload API servers of the multi-cluster
	// mode (1: the single-cluster benchmark), registered the number of
	// SFClusters registered for them (0: as many as clusters), scheduler
	// the ProviderConfig's spec.schedulerType there, and compareSingle
	// runs the single-cluster load phase first in the same run.
	clusters, registered int
	scheduler            string
	compareSingle        bool

	// fullAPI starts every API server as a production cluster runs it
	// (testenv.WithFullAPI: every API group and admission plugin, API
	// Priority and Fairness); without it they run the small test profile.
	fullAPI bool

	// broker runs the broker phase (broker.go) after the single-cluster
	// load phase, and its yardstick, the direct phase (direct.go).
	broker bool

	// load is the number of busy loops that load the machine during the
	// phases (machineload.go).
	load int

	// external runs another provisioner binary instead of the in-process
	// inter-operator (external.go).
	external externalConfig
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 1000, "instances of the load phase, and ConfigMaps of the raw-create baseline")
	flag.IntVar(&c.single, "single", 50, "instances of the idle phase, created one after another")
	flag.IntVar(&c.workers, "workers", 8, "goroutines that create instances (and the baseline's ConfigMaps)")
	flag.IntVar(&c.concurrency, "concurrency", interoperator.DefaultMaxConcurrentReconciles, "instance reconciles the inter-operator runs at once")
	flag.Float64Var(&c.qps, "qps", providerapp.DefaultQPS, "client-side QPS of every client (inter-operator's platform, onboarding and target clients; the benchmark's); the default is the shipped one, negative: no client-side limit")
	flag.IntVar(&c.burst, "burst", providerapp.DefaultBurst, "client-side burst of every client, when -qps is positive")
	flag.IntVar(&c.servers, "servers", 1, "API servers: 1 (one plays platform, onboarding and target) or 3 (one per role)")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Minute, "how long the load phase may take")
	flag.DurationVar(&c.settle, "settle", 3*time.Second, "quiet time before the write counts are read again, so that late writes (events) count")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the -profile-phase (this process: provisioner, broker and clients) to this file")
	flag.StringVar(&c.apiserverProfile, "apiserver-cpuprofile", "", "write a CPU profile of the onboarding kube-apiserver's first 5 s of the -profile-phase to this file")
	flag.StringVar(&c.profilePhase, "profile-phase", "load", "the phase -cpuprofile and -apiserver-cpuprofile profile: load, broker (provision+bind through the broker) or deprovision")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 when a target is missed")
	flag.BoolVar(&c.verbose, "v", false, "log the inter-operator to stderr")
	flag.IntVar(&c.clusters, "clusters", 1, "workload API servers: with more than 1, the load phase places the instances on SFClusters of that many servers with -scheduler")
	flag.IntVar(&c.registered, "registered", 0, "SFClusters registered in the multi-cluster mode, round-robin over the -clusters workload servers (default: -clusters)")
	flag.StringVar(&c.scheduler, "scheduler", "", "the ProviderConfig's spec.schedulerType in the multi-cluster mode (default least-filled)")
	flag.BoolVar(&c.compareSingle, "compare-single", false, "in the multi-cluster mode, run the single-cluster load phase (same -n) first and print the multi ÷ single rate")
	flag.BoolVar(&c.fullAPI, "full-api", true, "start the API servers as a production cluster runs them (every API group and admission plugin, API Priority and Fairness); false: the small test profile")
	flag.BoolVar(&c.broker, "broker", true, "after the load phase, run the broker phase: the same plan through the OSB broker (broker.go), then the same provision+bind without the broker (direct.go)")
	flag.IntVar(&c.load, "load", 0, "busy loops (sh -c 'while :; do :; done') that load the machine from before the first phase to the end of the run")
	c.external.addFlags(flag.CommandLine)
	flag.Parse()
	// An interrupt ends the run through its context, so that the busy
	// loops and the API servers are stopped; a second one kills at once.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stopSignals() }()
	r, err := run(ctx, c, os.Stdout)
	stopSignals()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/provisioning:", err)
		os.Exit(2)
	}
	if c.strict && !r.ok() {
		os.Exit(1)
	}
}

// report holds the figures of a run.
type report struct {
	rawPerSecond          float64
	idleP50, idleP99      time.Duration
	loadPerSecond         float64
	loadP50, loadP99      time.Duration
	provisionerWrites     float64 // per instance, events aside
	registryWrites        float64 // SFCluster status writes, in all
	eventWrites           float64 // per instance
	benchmarkWrites       float64 // per instance
	reconcilesPerInstance float64
	instancesSucceeded    int
	// apiserverCPU is the CPU time of the API server(s) in the load phase
	// per instance.
	apiserverCPU time.Duration

	// broker holds the figures of the broker phase; nil when it did not
	// run.
	broker *brokerReport

	// multi holds the figures of the multi-cluster mode; nil in the
	// single-cluster benchmark, where the load figures above are the
	// single-cluster load phase's. In the multi-cluster mode they are the
	// multi-cluster load phase's.
	multi *multiReport
}

// ok reports whether every target is met: the idle latencies, the load
// phase's (loadOK), and the broker phase's when it ran. In the
// multi-cluster mode the load targets are those of multiReport.ok.
func (r report) ok() bool {
	if r.broker != nil && !r.broker.ok() {
		return false
	}
	if r.multi != nil {
		return r.idleOK() && r.multi.ok(r)
	}
	return r.idleOK() && r.loadOK()
}

// idleOK reports whether the idle phase's latencies meet their targets.
func (r report) idleOK() bool { return r.idleP50 <= targetIdleP50 && r.idleP99 <= targetIdleP99 }

// loadOK reports whether the load phase meets its targets: its rate
// against the raw create rate of the same run, the API server's CPU per
// instance and the provisioner's writes per instance.
func (r report) loadOK() bool { return r.rawRatioOK() && r.apiserverCPUOK() && r.writesOK() }

// rawRatio is the load phase's instances/s ÷ the raw phase's creates/s.
func (r report) rawRatio() float64 {
	if r.rawPerSecond <= 0 {
		return 0
	}
	return r.loadPerSecond / r.rawPerSecond
}

func (r report) rawRatioOK() bool { return r.rawRatio() >= targetRawRatio }

// apiserverCPUOK: a run that measured no API server CPU at all did not
// measure it, and misses.
func (r report) apiserverCPUOK() bool {
	return r.apiserverCPU > 0 && r.apiserverCPU <= targetAPIServerCPU
}

// writesOK reports whether the provisioner's writes per instance, events
// included, meet the target. Writes are counted events aside, as the
// inter-operator's TestWritesPerInstance counts them; the report prints
// them with events too.
func (r report) writesOK() bool { return r.provisionerWrites+r.eventWrites <= targetWrites }

// roles are the API servers of the three roles; they may be one.
type roles struct {
	platform, onboarding, target *testenv.Cluster
	// workloads are the workload API servers of the multi-cluster mode,
	// apart from the three roles.
	workloads []*testenv.Cluster
	// names of the distinct servers, for the write counts.
	names map[*testenv.Cluster]string
}

// describe names the API server c.
func (r roles) describe(c *testenv.Cluster) string {
	if len(r.distinct()) == 1 {
		return "API server"
	}
	return r.names[c] + " API server"
}

// distinct returns the API servers, each once.
func (r roles) distinct() []*testenv.Cluster {
	var out []*testenv.Cluster
	for _, c := range []*testenv.Cluster{r.platform, r.onboarding, r.target} {
		if len(out) == 0 || out[len(out)-1] != c {
			out = append(out, c)
		}
	}
	return append(out, r.workloads...)
}

func run(ctx context.Context, c config, out io.Writer) (rep report, err error) {
	c, err = c.checked()
	if err != nil {
		return rep, err
	}
	setLoggers(c.verbose)
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	defer cancel()
	// What aborted the run (the provisioner command exiting) says more
	// than the canceled request it broke off.
	defer func() {
		if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
	}()

	start := time.Now()
	var base []testenv.Option
	if c.fullAPI {
		base = append(base, testenv.WithFullAPI())
	}
	rs, stop, err := startServers(c.servers, c.clusters, base...)
	if err != nil {
		return rep, err
	}
	defer func() {
		// Close the watch first: the API server waits for it to end.
		cancel()
		stop()
	}()

	benchCfg := c.limited(rs.onboarding, "provisioning-bench")
	own := wrapCounting(rs.names[rs.onboarding], benchCfg)
	bc, err := client.NewWithWatch(benchCfg, client.Options{Scheme: rs.platform.Scheme})
	if err != nil {
		return rep, err
	}
	if err := setupCatalog(ctx, rs); err != nil {
		return rep, err
	}
	for _, ns := range []string{instanceNS, rawNS} {
		if err := rs.onboarding.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return rep, err
		}
	}
	platformCache, stopProvisioner, err := startProvisioner(ctx, cancelCause, c, rs, out)
	if err != nil {
		return rep, err
	}
	defer stopProvisioner()

	tr := newTracker()
	if err := tr.watch(ctx, bc, instanceNS); err != nil {
		return rep, err
	}
	h := &harness{c: c, out: out, rs: rs, client: bc, own: own, tracker: tr, platformCache: platformCache}
	stopBusyLoops, err := startBusyLoops(c.load)
	if err != nil {
		return rep, err
	}
	defer stopBusyLoops() //nolint:errcheck // stopped below; a second stop does nothing
	printSetup(out, c, time.Since(start))
	for _, phase := range h.phases() {
		if err := h.runPhase(ctx, phase, &rep); err != nil {
			return rep, err
		}
	}
	if err := stopBusyLoops(); err != nil {
		return rep, err
	}
	fmt.Fprintf(out, "\nall targets met: %s (total run %s; -load %d; load average (1 min) now %.2f)\n",
		verdict(rep.ok()), time.Since(start).Round(100*time.Millisecond), c.load, procstat.LoadAverage())
	return rep, nil
}

// checked checks the flags and fills in the defaults that depend on them.
func (c config) checked() (config, error) {
	if c.n < 1 || c.single < 1 || c.workers < 1 || c.concurrency < 1 || c.qps == 0 || c.burst < 1 {
		return c, errors.New("-n, -single, -workers, -concurrency and -burst must be positive, -qps not 0 (negative: no client-side limit)")
	}
	if c.load < 0 {
		return c, fmt.Errorf("-load %d: want 0 or more busy loops", c.load)
	}
	switch c.profilePhase {
	case "":
		c.profilePhase = "load"
	case "load", "broker", "deprovision":
	default:
		return c, fmt.Errorf("-profile-phase %q: want load, broker or deprovision", c.profilePhase)
	}
	c, err := c.withMultiClusterDefaults()
	if err != nil {
		return c, err
	}
	return c.checkedExternal()
}

// setLoggers discards the clients' logs and, unless verbose, the
// controllers' logs too.
func setLoggers(verbose bool) {
	klog.SetLogger(logr.Discard())
	if verbose {
		ctrl.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
}

// limited is a copy of cl's rest.Config with the rate limits of -qps and
// -burst and the user agent agent.
func (c config) limited(cl *testenv.Cluster, agent string) *rest.Config {
	cfg := rest.CopyConfig(cl.Config)
	cfg.QPS, cfg.Burst, cfg.UserAgent = float32(c.qps), c.burst, agent
	return cfg
}

// startInterOperator runs the inter-operator as its binary runs it, with
// the rate limits of -qps and -burst (by default the shipped ones) on each
// of its clients. It returns a reader of the platform cluster through the
// inter-operator's cache and how to stop it.
func startInterOperator(ctx context.Context, c config, rs roles) (client.Reader, func(), error) {
	scheme := rs.platform.Scheme
	platformCluster, err := cluster.New(c.limited(rs.platform, "marketplane-interoperator"), func(o *cluster.Options) { o.Scheme = scheme })
	if err != nil {
		return nil, nil, err
	}
	mgr, err := ctrl.NewManager(c.limited(rs.onboarding, "marketplane-interoperator"), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The tests run the benchmark several times in one process; the
		// reconcile counts are read as differences, so that sharing the
		// controllers' metrics does not matter.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(platformCluster); err != nil {
		return nil, nil, err
	}
	if _, err := interoperator.Setup(ctx, mgr, platformCluster, providerName,
		interoperator.WithMaxConcurrentReconciles(c.concurrency),
		interoperator.WithTargetRateLimits(float32(c.qps), c.burst)); err != nil {
		return nil, nil, err
	}
	mctx, mcancel := context.WithCancel(ctx)
	mdone := make(chan error, 1)
	go func() { mdone <- mgr.Start(mctx) }()
	stop := func() {
		mcancel()
		if err := <-mdone; err != nil {
			fmt.Fprintf(os.Stderr, "the manager stopped with an error: %v\n", err)
		}
	}
	return platformCluster.GetClient(), stop, nil
}

// printSetup prints what the run measures and with which settings.
func printSetup(out io.Writer, c config, took time.Duration) {
	profile := "production profile: every API group and admission plugin, API Priority and Fairness"
	if !c.fullAPI {
		profile = "small test profile: no API Priority and Fairness, fewer API groups (-full-api=false)"
	}
	fmt.Fprintf(out, "bench/provisioning: %s (started in %s); API servers in the %s\n", describeServers(c.servers, c.clusters), took.Round(100*time.Millisecond), profile)
	templates := "no status template"
	if c.external.statusTemplate {
		templates = "sources and status templates (-status-template)"
	}
	fmt.Fprintf(out, "GOMAXPROCS=%d NumCPU=%d; one-object plan (one ConfigMap per instance, %s)\n", goruntime.GOMAXPROCS(0), goruntime.NumCPU(), templates)
	if c.external.command != "" {
		fmt.Fprintf(out, "provisioner: the command below, with its own client settings and %d workers where it reads interoperator-config; benchmark: %d creating goroutines, %s\n",
			c.concurrency, c.workers, describeLimits(c.qps, c.burst))
	} else {
		fmt.Fprintf(out, "client-side rate limits of every rest.Config (inter-operator: platform, onboarding, target; benchmark): %s\n", describeLimits(c.qps, c.burst))
		fmt.Fprintf(out, "inter-operator: %d concurrent instance reconciles; benchmark: %d creating goroutines\n", c.concurrency, c.workers)
	}
	fmt.Fprintf(out, "machine load: -load %d (busy loops from before the first phase to the end of the run; 1-minute load average now %.2f)\n", c.load, procstat.LoadAverage())
	fmt.Fprintf(out, "instances are created as the broker does: one create (finalizer, last-operation label; an empty state means in_queue)\n\n")
}

// phases are the run's measurements in their order.
func (h *harness) phases() []func(context.Context, *report) error {
	phases := []func(context.Context, *report) error{h.idle, h.raw}
	if h.c.clusters != 1 {
		return append(phases, h.multiCluster)
	}
	phases = append(phases, func(ctx context.Context, rep *report) error {
		return h.load(ctx, rep, loadPhase{title: "load", prefix: "load", profile: true, rateTarget: true})
	})
	if h.c.broker {
		phases = append(phases, h.brokerPhase, h.directPhase)
	}
	return phases
}

// runPhase runs phase with its output held back until it ends, so that
// the phase's first line can name the load average at its start and end.
// What the phase wrote is written out even when it failed.
func (h *harness) runPhase(ctx context.Context, phase func(context.Context, *report) error, rep *report) error {
	out := h.out
	var buf bytes.Buffer
	h.out = &buf
	startLoad := procstat.LoadAverage()
	err := phase(ctx, rep)
	h.out = out
	_, werr := out.Write(withFirstLineSuffix(buf.Bytes(), " "+describeLoad(startLoad, procstat.LoadAverage())))
	return errors.Join(err, werr)
}

// withFirstLineSuffix returns b with suffix at the end of its first
// non-empty line.
func withFirstLineSuffix(b []byte, suffix string) []byte {
	start := 0
	for start < len(b) && b[start] == '\n' {
		start++
	}
	if start == len(b) {
		return b
	}
	end := bytes.IndexByte(b[start:], '\n')
	if end < 0 {
		end = len(b)
	} else {
		end += start
	}
	out := make([]byte, 0, len(b)+len(suffix))
	out = append(out, b[:end]...)
	out = append(out, suffix...)
	return append(out, b[end:]...)
}

// harness is what the phases of a run share.
type harness struct {
	c       config
	out     io.Writer
	rs      roles
	client  client.WithWatch
	own     *countingTransport
	tracker *tracker
	// platformCache reads the platform cluster through the
	// inter-operator's own cache, so that the benchmark can wait until the
	// inter-operator sees a change before it measures.
	platformCache client.Reader
}

// idle provisions instances one at a time on an otherwise idle system.
func (h *harness) idle(ctx context.Context, rep *report) error {
	if _, err := h.sequential(ctx, []string{"warmup"}); err != nil {
		return err
	}
	before, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	_, ownBefore := h.own.snapshot()
	idle, err := h.sequential(ctx, names("idle", h.c.single))
	if err != nil {
		return err
	}
	after, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	_, ownAfter := h.own.snapshot()
	rep.idleP50, rep.idleP99 = percentile(idle, 0.50), percentile(idle, 0.99)
	fmt.Fprintf(h.out, "idle: %d instances one after another, create→succeeded: p50 %s  p99 %s  (target p50 ≤ %s, p99 ≤ %s: %s)\n",
		h.c.single, ms(rep.idleP50), ms(rep.idleP99), ms(targetIdleP50), ms(targetIdleP99), verdict(rep.idleOK()))
	fmt.Fprintf(h.out, "      max %s; writes that got 409 meanwhile: %s (the benchmark's, as the broker's: %s)\n",
		ms(percentile(idle, 1)), after.minus(before).conflicts, ownAfter.minus(ownBefore))
	time.Sleep(h.c.settle)
	return nil
}

// raw measures the create rate of the onboarding API server, where the
// instances are created, with the benchmark's client.
func (h *harness) raw(ctx context.Context, rep *report) error {
	elapsed, err := parallel.Run(ctx, h.c.workers, h.c.n, func(ctx context.Context, i int) error {
		return h.client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: rawNS, Name: fmt.Sprintf("raw-%05d", i)},
			Data:       map[string]string{"instanceId": fmt.Sprintf("raw-%05d", i), "plan": "one-configmap"},
		})
	})
	if err != nil {
		return fmt.Errorf("raw creates: %w", err)
	}
	rep.rawPerSecond = float64(h.c.n) / elapsed.Seconds()
	fmt.Fprintf(h.out, "raw:  %d ConfigMaps created by %d goroutines on the %s: %.0f creates/s (%s)\n",
		h.c.n, h.c.workers, h.rs.describe(h.rs.onboarding), rep.rawPerSecond, elapsed.Round(time.Millisecond))
	if len(h.rs.workloads) > 0 {
		fmt.Fprintf(h.out, "      (the onboarding server, where the instances are created and their status written; the %d workload servers, which receive only the ConfigMaps, are not measured)\n", len(h.rs.workloads))
	}
	time.Sleep(h.c.settle)
	return nil
}

// loadPhase describes a load phase: the single-cluster benchmark's, or
// one of the multi-cluster mode's.
type loadPhase struct {
	// title starts the phase's first line; prefix starts the names of its
	// instances.
	title, prefix string
	// profile: -cpuprofile and -apiserver-cpuprofile profile this phase.
	profile bool
	// rateTarget: the phase shows the single-cluster targets (its rate
	// against the raw creates, the API server's CPU per instance).
	rateTarget bool
}

// load creates -n instances at once and measures how fast they succeed
// and what they cost.
func (h *harness) load(ctx context.Context, rep *report, phase loadPhase) error {
	n := h.c.n
	before, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	ownBefore, _ := h.own.snapshot()
	reconcilesBefore := reconciles()
	cpuBefore := cpuSeconds()
	stopProfiles, err := h.startProfiles(ctx, phase.profile && h.c.profilePhase == "load")
	if err != nil {
		return err
	}
	defer stopProfiles() //nolint:errcheck // stopped again below; a second stop does nothing
	entries := make([]*entry, n)
	for i, name := range names(phase.prefix, n) {
		entries[i] = h.tracker.expect(name)
	}
	start := time.Now()
	createElapsed, err := parallel.Run(ctx, h.c.workers, n, func(ctx context.Context, i int) error {
		return h.provision(ctx, entries[i])
	})
	if err != nil {
		return fmt.Errorf("create instances: %w", err)
	}
	end, err := h.tracker.waitAll(ctx, entries, h.c.timeout)
	if err != nil {
		return err
	}
	profiled := stopProfiles()
	cpuAfter := cpuSeconds()
	elapsed := end.Sub(start)
	rep.instancesSucceeded = len(entries)
	rep.loadPerSecond = float64(n) / elapsed.Seconds()
	lat := make([]time.Duration, len(entries))
	for i, e := range entries {
		lat[i] = e.done.Sub(e.created)
	}
	rep.loadP50, rep.loadP99 = percentile(lat, 0.50), percentile(lat, 0.99)
	if profiled != nil {
		return profiled
	}
	time.Sleep(h.c.settle)
	after, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	ownAfter, _ := h.own.snapshot()
	rep.reconcilesPerInstance = (reconciles() - reconcilesBefore) / float64(n)
	rep.apiserverCPU = perInstance(cpuAfter[apiserverProcess]-cpuBefore[apiserverProcess], n)

	fmt.Fprintf(h.out, "%s: %d instances created by %d goroutines, first create → all succeeded in %s\n",
		phase.title, n, h.c.workers, elapsed.Round(time.Millisecond))
	if phase.rateTarget {
		fmt.Fprintf(h.out, "  instances/s:               %8.1f\n", rep.loadPerSecond)
	} else {
		fmt.Fprintf(h.out, "  instances/s:               %8.1f   (target ≥ %.1f× the single-cluster rate: below)\n", rep.loadPerSecond, targetMultiRatio)
	}
	fmt.Fprintf(h.out, "  create→succeeded:          p50 %s  p99 %s  (the creates took %s: instances queue up)\n",
		ms(rep.loadP50), ms(rep.loadP99), createElapsed.Round(time.Millisecond))
	ratio := fmt.Sprintf("  instances/s ÷ raw creates/s: %6.3f   (%.1f / %.0f", rep.rawRatio(), rep.loadPerSecond, rep.rawPerSecond)
	cpu := fmt.Sprintf("  kube-apiserver CPU per instance: %s   (%.2f s / %d", ms(rep.apiserverCPU), rep.apiserverCPU.Seconds()*float64(n), n)
	if phase.rateTarget {
		ratio += fmt.Sprintf("; target ≥ %.1f: %s", targetRawRatio, verdict(rep.rawRatioOK()))
		cpu += fmt.Sprintf("; target ≤ %s: %s", ms(targetAPIServerCPU), verdict(rep.apiserverCPUOK()))
	}
	fmt.Fprintln(h.out, ratio+")")
	fmt.Fprintln(h.out, cpu+")")
	if h.c.external.command == "" {
		fmt.Fprintf(h.out, "  instance reconciles per instance: %.2f\n", rep.reconcilesPerInstance)
	}
	printCPU(h.out, "load phase", cpuBefore, cpuAfter, elapsed)

	rep.writeTable(h.out, after.minus(before), ownAfter.minus(ownBefore), n)
	if phase.profile && h.c.profilePhase == "load" {
		h.printProfiles()
	}
	return nil
}

// writeTable prints the requests of the load phase and fills in the per
// instance figures.
func (r *report) writeTable(out io.Writer, s scrapes, own writeCounts, n int) {
	per := func(v float64) float64 { return v / float64(n) }
	fmt.Fprintf(out, "\nAPI writes during the load phase (apiserver_request_total, verbs POST/PUT/PATCH/APPLY/DELETE, every code):\n")
	fmt.Fprintf(out, "  %-10s %-26s %8s %8s %10s %12s %9s\n", "server", "resource", "total", "409s", "benchmark", "provisioner", "provisioner")
	fmt.Fprintf(out, "  %-10s %-26s %8s %8s %10s %12s %9s\n", "", "", "", "", "", "", "/instance")
	for _, k := range s.writes.keys() {
		total, mine := s.writes[k], own[k]
		theirs := total - mine
		note := ""
		switch {
		case k.resource == "leases":
			// The API server renews its own identity lease; the manager
			// runs without leader election.
			note = "  API server's own lease renewals, not counted"
		case strings.HasPrefix(k.resource, "events"):
			r.eventWrites += per(theirs)
			note = "  events"
		case k.resource == "sfclusters/status":
			// The cluster registry's: at most one per SFCluster and
			// count delay, however many instances come.
			r.registryWrites += theirs
			note = "  the SFClusters' status: per cluster, not per instance"
		default:
			r.provisionerWrites += per(theirs)
		}
		fmt.Fprintf(out, "  %-10s %-26s %8.0f %8.0f %10.0f %12.0f %9.2f%s\n", k.server, k.resource, total, s.conflicts[k], mine, theirs, per(theirs), note)
	}
	for k, v := range own {
		r.benchmarkWrites += per(v)
		if _, ok := s.writes[k]; !ok {
			fmt.Fprintf(out, "  (the benchmark counted %.0f writes of %s that the API server did not)\n", v, k.resource)
		}
	}
	fmt.Fprintf(out, "  provisioner writes per instance, events aside: %.2f\n", r.provisionerWrites)
	fmt.Fprintf(out, "  provisioner writes per instance with its events: %.2f + %.2f = %.2f   (target ≤ %.0f: %s)\n",
		r.provisionerWrites, r.eventWrites, r.provisionerWrites+r.eventWrites, targetWrites, verdict(r.writesOK()))
	fmt.Fprintf(out, "  SFCluster status writes (the cluster registry's, bounded per cluster, not counted above): %.0f\n", r.registryWrites)
	fmt.Fprintf(out, "  the benchmark's own writes per instance (the broker's part: the create): %.2f\n", r.benchmarkWrites)

	servers := map[string]bool{}
	for k := range s.reads {
		servers[k.server] = true
	}
	var reads []string
	for _, k := range s.reads.keys() {
		if v := per(s.reads[k]); v >= 0.01 && !strings.HasPrefix(k.resource, "WATCH") {
			name := k.resource
			if len(servers) > 1 {
				name = k.server + " " + name
			}
			reads = append(reads, fmt.Sprintf("%s %.2f", name, v))
		}
	}
	if len(reads) == 0 {
		reads = []string{"none"}
	}
	fmt.Fprintf(out, "  reads per instance (everyone's, GET/LIST): %s\n", strings.Join(reads, ", "))
}

// provision creates the instance of e as the broker records a provision
// request, and notes when the API server acknowledged it.
func (h *harness) provision(ctx context.Context, e *entry) error {
	inst := brokerobj.Instance(client.ObjectKey{Namespace: instanceNS, Name: e.name}, e.name, serviceID, planID)
	h.c.external.shape(inst)
	if err := h.client.Create(ctx, inst); err != nil {
		return fmt.Errorf("create instance %s: %w", e.name, err)
	}
	h.tracker.created(e, time.Now())
	return nil
}

// sequential provisions the named instances one after another, each when
// the previous one succeeded, and returns their latencies.
func (h *harness) sequential(ctx context.Context, names []string) ([]time.Duration, error) {
	var out []time.Duration
	for _, n := range names {
		e := h.tracker.expect(n)
		if err := h.provision(ctx, e); err != nil {
			return nil, err
		}
		if _, err := h.tracker.waitAll(ctx, []*entry{e}, time.Minute); err != nil {
			return nil, err
		}
		out = append(out, e.done.Sub(e.created))
	}
	return out, nil
}

// tracker records, from a watch, when instances reach a final state.
type tracker struct {
	mu      sync.Mutex
	entries map[string]*entry
}

// entry is one tracked instance. created, done and failure are written
// before doneCh is closed.
type entry struct {
	name          string
	created, done time.Time
	failure       string
	// secret is a binding's response Secret, as its final state named it.
	secret string
	doneCh chan struct{}
	closed bool
}

func newTracker() *tracker { return &tracker{entries: map[string]*entry{}} }

// expect starts tracking the instance name.
func (t *tracker) expect(name string) *entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := &entry{name: name, doneCh: make(chan struct{})}
	t.entries[name] = e
	return e
}

// created notes when the instance's create returned.
func (t *tracker) created(e *entry, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.created = at
}

// observe records a state the watch delivered of an instance.
func (t *tracker) observe(inst *osbv1alpha1.SFServiceInstance, at time.Time) {
	t.observeState(inst.Name, inst.Status.State, firstNonEmpty(inst.Status.Error, inst.Status.Description, "failed"), "", at)
}

// observeBinding records a state the watch delivered of a binding.
func (t *tracker) observeBinding(b *osbv1alpha1.SFServiceBinding, at time.Time) {
	secret := ""
	if b.Status.Response != nil {
		secret = b.Status.Response.SecretRef
	}
	t.observeState(b.Name, b.Status.State, firstNonEmpty(b.Status.Error, "failed"), secret, at)
}

// observeState ends the wait for the object name when state is final.
func (t *tracker) observeState(name string, state osbv1alpha1.State, failure, secret string, at time.Time) {
	if state != osbv1alpha1.StateSucceeded && state != osbv1alpha1.StateFailed {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[name]
	if e == nil || e.closed {
		return
	}
	e.done, e.closed, e.secret = at, true, secret
	if state == osbv1alpha1.StateFailed {
		e.failure = failure
	}
	close(e.doneCh)
}

// watch watches the instances in namespace (every namespace when empty)
// and records their states, until ctx ends. It returns once the first
// watch is established.
func (t *tracker) watch(ctx context.Context, c client.WithWatch, namespace string) error {
	return t.watchKind(ctx, c, &osbv1alpha1.SFServiceInstanceList{}, namespace)
}

// watchKind is watch for the kind of list: SFServiceInstances or
// SFServiceBindings.
func (t *tracker) watchKind(ctx context.Context, c client.WithWatch, list client.ObjectList, namespace string) error {
	open := func(rv string) (watch.Interface, error) {
		return c.Watch(ctx, list, client.InNamespace(namespace),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	}
	w, err := open("")
	if err != nil {
		return fmt.Errorf("watch %T: %w", list, err)
	}
	go t.follow(ctx, w, open)
	return nil
}

// follow records the states w delivers and reopens the watch (from the
// last resourceVersion seen, or from scratch after it expired) until ctx
// ends.
func (t *tracker) follow(ctx context.Context, w watch.Interface, open func(rv string) (watch.Interface, error)) {
	rv := ""
	for {
		for ev := range w.ResultChan() {
			now := time.Now()
			switch obj := ev.Object.(type) {
			case *osbv1alpha1.SFServiceInstance:
				rv = obj.ResourceVersion
				t.observe(obj, now)
			case *osbv1alpha1.SFServiceBinding:
				rv = obj.ResourceVersion
				t.observeBinding(obj, now)
			case *metav1.Status:
				rv = ""
			}
		}
		w.Stop()
		for {
			if ctx.Err() != nil {
				return
			}
			next, err := open(rv)
			if err == nil {
				w = next
				break
			}
			rv = ""
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// waitAll waits until every entry is done and returns the time the last
// one was. An instance that failed is an error.
func (t *tracker) waitAll(ctx context.Context, entries []*entry, timeout time.Duration) (time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last time.Time
	for _, e := range entries {
		select {
		case <-e.doneCh:
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("instances did not succeed within %s: %d of %d done", timeout, countDone(entries), len(entries))
		case <-ctx.Done():
			return time.Time{}, context.Cause(ctx)
		}
		if e.failure != "" {
			return time.Time{}, fmt.Errorf("instance %s failed: %s", e.name, e.failure)
		}
		if e.done.After(last) {
			last = e.done
		}
	}
	return last, nil
}

func countDone(entries []*entry) int {
	n := 0
	for _, e := range entries {
		select {
		case <-e.doneCh:
			n++
		default:
		}
	}
	return n
}

// startServers starts the API servers of the roles and, with workloads
// above 1, that many workload API servers.
func startServers(n, workloads int, base ...testenv.Option) (roles, func(), error) {
	rs, stop, err := startRoles(n, base...)
	if err != nil || workloads <= 1 {
		return rs, stop, err
	}
	if n == 1 {
		// "all" would claim the workload servers' role too.
		rs.names[rs.platform] = "main"
	}
	ws, stopWorkloads, err := startWorkloads(workloads, base...)
	if err != nil {
		stop()
		return rs, nil, err
	}
	rs.workloads = ws
	for _, w := range ws {
		rs.names[w] = w.Name
	}
	return rs, func() { stopWorkloads(); stop() }, nil
}

// startRoles starts the API servers of the three roles: one, or one each.
// base are options of every server.
func startRoles(n int, base ...testenv.Option) (roles, func(), error) {
	var rs roles
	switch n {
	case 1:
		c, err := testenv.New(append(slices.Clone(base), testenv.WithName("bench"))...)
		if err != nil {
			return rs, nil, err
		}
		rs = roles{platform: c, onboarding: c, target: c, names: map[*testenv.Cluster]string{c: "all"}}
		return rs, func() { _ = c.Stop() }, nil
	case 3:
		names := []string{"platform", "onboarding", "target"}
		cs := make([]*testenv.Cluster, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i, name := range names {
			opts := append(slices.Clone(base), testenv.WithName(name))
			if name == "target" {
				opts = append(opts, testenv.WithCRDs())
			}
			wg.Go(func() { cs[i], errs[i] = testenv.New(opts...) })
		}
		wg.Wait()
		stop := func() {
			for _, c := range cs {
				if c != nil {
					_ = c.Stop()
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			stop()
			return rs, nil, err
		}
		rs = roles{platform: cs[0], onboarding: cs[1], target: cs[2], names: map[*testenv.Cluster]string{}}
		for i, c := range cs {
			rs.names[c] = names[i]
		}
		return rs, stop, nil
	}
	return rs, nil, fmt.Errorf("-servers must be 1 or 3, not %d", n)
}

// describeLimits describes the client-side rate limits qps and burst.
func describeLimits(qps float64, burst int) string {
	s := fmt.Sprintf("qps=%g burst=%d", qps, burst)
	if qps < 0 {
		s = fmt.Sprintf("qps=%g (no client-side limit)", qps)
	}
	if qps == providerapp.DefaultQPS && burst == providerapp.DefaultBurst {
		s += ", as shipped"
	}
	return s
}

func describeServers(n, workloads int) string {
	s := "3 API servers (etcd + kube-apiserver each): platform, onboarding, target"
	if n == 1 {
		s = "1 API server (etcd + kube-apiserver) plays platform, onboarding and target"
		if workloads > 1 {
			s = "1 API server (etcd + kube-apiserver, \"main\") plays platform, onboarding and target"
		}
	}
	if workloads > 1 {
		s += fmt.Sprintf(" (SFCluster %q: the idle and single-cluster phases); %d workload API servers (workload-1 … workload-%d) for the multi-cluster load phase",
			clusterName, workloads, workloads)
	}
	return s
}

// setupCatalog registers the ProviderConfig, the SFCluster of the target
// server, the SFService and the one-object SFPlan on the platform server.
func setupCatalog(ctx context.Context, rs roles) error {
	c := rs.platform.Client
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: catalogNamespace}},
		&interoperatorv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Name: providerName},
			Spec:       interoperatorv1alpha1.ProviderConfigSpec{CatalogNamespace: catalogNamespace},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: catalogNamespace, Name: clusterName + "-kubeconfig"},
			Data:       map[string][]byte{resourcev1alpha1.KubeconfigSecretKey: rs.target.Kubeconfig},
		},
		&resourcev1alpha1.SFCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: catalogNamespace, Name: clusterName},
			Spec:       resourcev1alpha1.SFClusterSpec{SecretRef: clusterName + "-kubeconfig"},
		},
		&osbv1alpha1.SFService{
			ObjectMeta: metav1.ObjectMeta{Namespace: catalogNamespace, Name: "bench"},
			Spec:       osbv1alpha1.SFServiceSpec{ID: serviceID, Name: "bench", Description: "benchmark service", Bindable: true},
		},
		&osbv1alpha1.SFPlan{
			ObjectMeta: metav1.ObjectMeta{Namespace: catalogNamespace, Name: "one-configmap"},
			Spec: osbv1alpha1.SFPlanSpec{ID: planID, Name: "one-configmap", ServiceID: serviceID,
				Description: "one ConfigMap per instance", Free: true, Bindable: true,
				Templates: []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: provisionTemplate}}},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// waitPlanValid waits until the catalog controller accepted the plan.
func waitPlanValid(ctx context.Context, c client.Client) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p := &osbv1alpha1.SFPlan{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: catalogNamespace, Name: "one-configmap"}, p); err != nil {
			return false, err
		}
		return p.Status.SpecHash != "", nil
	})
	if err != nil {
		return fmt.Errorf("the catalog did not accept the plan: %w", err)
	}
	return nil
}

// scrapeAll reads the request counts of every distinct server.
func scrapeAll(ctx context.Context, rs roles) (scrapes, error) {
	s := scrapes{writes: writeCounts{}, conflicts: writeCounts{}, reads: writeCounts{}}
	for _, c := range rs.distinct() {
		cs, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			return s, err
		}
		if err := s.scrape(ctx, rs.names[c], cs); err != nil {
			return s, err
		}
	}
	return s, nil
}

// startProfiles starts the profiles asked for by -cpuprofile and
// -apiserver-cpuprofile when on is true; stop ends them and returns the
// API server profile's error. Calling stop again does nothing.
func (h *harness) startProfiles(ctx context.Context, on bool) (stop func() error, err error) {
	if !on || (h.c.cpuprofile == "" && h.c.apiserverProfile == "") {
		return func() error { return nil }, nil
	}
	var f *os.File
	if h.c.cpuprofile != "" {
		if f, err = os.Create(h.c.cpuprofile); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	apiserverProfiled := make(chan error, 1)
	if h.c.apiserverProfile != "" {
		go func() { apiserverProfiled <- profileAPIServer(ctx, h.rs.onboarding, h.c.apiserverProfile, 5) }()
	} else {
		apiserverProfiled <- nil
	}
	var once sync.Once
	var stopErr error
	return func() error {
		once.Do(func() {
			if f != nil {
				pprof.StopCPUProfile()
				stopErr = f.Close()
			}
			stopErr = errors.Join(<-apiserverProfiled, stopErr)
		})
		return stopErr
	}, nil
}

// printProfiles names the profile files written.
func (h *harness) printProfiles() {
	for _, p := range []string{h.c.cpuprofile, h.c.apiserverProfile} {
		if p != "" {
			fmt.Fprintf(h.out, "\nCPU profile (%s phase): %s (go tool pprof -top %s)", h.c.profilePhase, p, p)
		}
	}
}

// profileAPIServer writes a CPU profile of the API server of c over the
// given number of seconds to path.
func profileAPIServer(ctx context.Context, c *testenv.Cluster, path string, seconds int) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", fmt.Sprint(seconds)).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("profile the API server: %w", err)
	}
	return os.WriteFile(path, raw, 0o600)
}

// reconciles returns how often the instance controller has reconciled.
func reconciles() float64 { return reconcilesOf(interoperator.InstanceControllerName) }

// reconcilesOf returns how often the inter-operator's controller name has
// reconciled.
func reconcilesOf(name string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return math.NaN()
	}
	var total float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// printCPU prints the CPU time each process used in a phase (what) of wall
// time.
func printCPU(out io.Writer, what string, before, after map[string]float64, wall time.Duration) {
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	var sum float64
	for _, n := range names {
		d := after[n] - before[n]
		sum += d
		parts = append(parts, fmt.Sprintf("%s %.2fs", n, d))
	}
	fmt.Fprintf(out, "  CPU time in the %s: %s; total %.2fs of %.2fs available (%d cores × %s; the machine is shared)\n",
		what, strings.Join(parts, ", "), sum, wall.Seconds()*float64(goruntime.NumCPU()), goruntime.NumCPU(), wall.Round(time.Millisecond))
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}

// percentile returns the p-th percentile (nearest rank) of d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// perInstance is seconds of CPU time spread over n instances.
func perInstance(seconds float64, n int) time.Duration {
	return time.Duration(seconds / float64(n) * float64(time.Second))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
