package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/pkg/backoff"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

var _ deploy.Deployer = &Deployer{}

// Defaults of the options.
const (
	// DefaultReadyGrace is how long every run process must have stayed up
	// before run is Ready.
	DefaultReadyGrace = 3 * time.Second
	// DefaultStopTimeout is the wait between SIGTERM and SIGKILL.
	DefaultStopTimeout = 10 * time.Second
	// DefaultTokenTTL is the requested lifetime of ServiceAccount tokens.
	DefaultTokenTTL = time.Hour
	// DefaultPollInterval is InitStatus.RetryAfter while init runs.
	DefaultPollInterval = 2 * time.Second
)

// stableAfter is how long a run process must have stayed up for its restart
// backoff to start over.
const stableAfter = time.Minute

// DefaultRestartBackoff is the wait before restarting a run process that
// exited for the n-th time in a row: 1s, 2s, 4s, … capped at five minutes.
// The count starts over once a process stayed up for a minute.
func DefaultRestartBackoff(restarts int32) time.Duration {
	return restartBackoff.Wait(int(restarts))
}

// restartBackoff is the schedule of DefaultRestartBackoff.
var restartBackoff = backoff.Doubling{Base: time.Second, Max: 5 * time.Minute}

// Config holds what a Deployer needs.
type Config struct {
	// StateDir holds one directory per provider with its logs, credentials
	// and init records. It is created when missing.
	StateDir string
	// Images maps provider images to local binaries (see LoadImageMap).
	Images ImageMap
	// Platform is a REST config of the platform API server. Its address
	// and CA go into the processes' kubeconfigs; with Client nil, a client
	// built from it requests the tokens.
	Platform *rest.Config
	// Client, when set, requests the tokens (TokenRequest API) instead of
	// a client built from Platform.
	Client client.Client
}

// Option configures a Deployer.
type Option func(*options)

type options struct {
	clock          clock.Clock
	initBackoff    func(failedAttempt int32) time.Duration
	restartBackoff func(restarts int32) time.Duration
	readyGrace     time.Duration
	stopTimeout    time.Duration
	tokenTTL       time.Duration
	pollInterval   time.Duration
	inheritEnv     []string
	onChange       func(kind, name string)
	tokens         TokenSource
	// namespaceFile finds out how to start processes in a mount namespace
	// with the service-account namespace file (detectNamespaceFile).
	namespaceFile func(context.Context) (*syscall.SysProcAttr, error)
}

// WithClock replaces the real clock, for tests.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithInitBackoff replaces deploy.InitBackoff, the wait before another init
// attempt after attempt n failed.
func WithInitBackoff(fn func(failedAttempt int32) time.Duration) Option {
	return func(o *options) { o.initBackoff = fn }
}

// WithRestartBackoff replaces DefaultRestartBackoff, the wait before
// restarting a run process that exited.
func WithRestartBackoff(fn func(restarts int32) time.Duration) Option {
	return func(o *options) { o.restartBackoff = fn }
}

// WithReadyGrace sets how long run processes must have stayed up before
// run is Ready (DefaultReadyGrace).
func WithReadyGrace(d time.Duration) Option { return func(o *options) { o.readyGrace = d } }

// WithStopTimeout sets the wait between SIGTERM and SIGKILL
// (DefaultStopTimeout).
func WithStopTimeout(d time.Duration) Option { return func(o *options) { o.stopTimeout = d } }

// WithTokenTTL sets the requested token lifetime (DefaultTokenTTL; the API
// server enforces a minimum of ten minutes).
func WithTokenTTL(d time.Duration) Option { return func(o *options) { o.tokenTTL = d } }

// WithPollInterval sets InitStatus.RetryAfter while init runs
// (DefaultPollInterval).
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.pollInterval = d } }

// WithInheritedEnv passes these variables of the operator's environment to
// provider processes, besides DefaultInheritedEnv (for example proxy
// settings or GOCOVERDIR).
func WithInheritedEnv(names ...string) Option {
	return func(o *options) { o.inheritEnv = append(o.inheritEnv, names...) }
}

// WithOnChange registers fn, called with a provider's kind and name
// whenever one of its processes exits or run may have become ready, so that
// the caller can reconcile the provider again. fn must not block.
func WithOnChange(fn func(kind, name string)) Option { return func(o *options) { o.onChange = fn } }

// WithTokenSource replaces the TokenRequest API as the source of tokens.
func WithTokenSource(ts TokenSource) Option { return func(o *options) { o.tokens = ts } }

// Deployer runs providers as local processes. It is safe for concurrent
// use; Close stops everything it started.
type Deployer struct {
	cfg    Config
	opts   options
	clock  clock.Clock
	tokens TokenSource
	// server and caData locate the platform API server in kubeconfigs.
	server string
	caData []byte
	// inCluster is what in-cluster clients read the server from
	// (inClusterVars).
	inCluster []string
	spawner   *supervisor.Spawner
	// ports hands out the listen ports of run processes.
	ports portPool
	// nsOnce guards ns, found out on the first process start.
	nsOnce sync.Once
	ns     namespaceFileState

	mu        sync.Mutex
	closed    bool
	providers map[string]*provider
}

// provider is what a Deployer knows about one provider.
type provider struct {
	kind, name string
	dir        string

	mu sync.Mutex
	// init is the latest init attempt, nil before the first one.
	init *initAttempt
	// run is the current set of run processes; retired are sets being
	// stopped after a change of the spec.
	run     *runSet
	retired []*runSet
	// creds are the credentials by role.
	creds map[string]*credentials
}

// New returns a Deployer.
func New(cfg Config, opts ...Option) (*Deployer, error) {
	o := options{
		clock:          clock.RealClock{},
		initBackoff:    deploy.InitBackoff,
		restartBackoff: DefaultRestartBackoff,
		readyGrace:     DefaultReadyGrace,
		stopTimeout:    DefaultStopTimeout,
		tokenTTL:       DefaultTokenTTL,
		pollInterval:   DefaultPollInterval,
		inheritEnv:     append([]string{}, DefaultInheritedEnv...),
		namespaceFile:  detectNamespaceFile,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.StateDir == "" {
		return nil, errors.New("process deployer: no state directory")
	}
	if cfg.Platform == nil {
		return nil, errors.New("process deployer: no platform REST config")
	}
	if err := cfg.Images.Validate(); err != nil {
		return nil, fmt.Errorf("process deployer: %w", err)
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("process deployer: state directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("process deployer: create state directory: %w", err)
	}
	cfg.StateDir = dir
	d := &Deployer{cfg: cfg, opts: o, clock: o.clock, tokens: o.tokens, providers: map[string]*provider{}}
	if d.server, d.caData, err = platformEndpoint(cfg.Platform); err != nil {
		return nil, fmt.Errorf("process deployer: %w", err)
	}
	d.inCluster = inClusterVars(d.server)
	if d.tokens == nil {
		c := cfg.Client
		if c == nil {
			if c, err = client.New(cfg.Platform, client.Options{}); err != nil {
				return nil, fmt.Errorf("process deployer: platform client: %w", err)
			}
		}
		d.tokens = TokenRequester{Client: c}
	}
	d.spawner = supervisor.NewSpawner(supervisor.WithClock(d.clock))
	return d, nil
}

// providerDir is the state directory of w's provider.
func (d *Deployer) providerDir(w *deploy.Workload) string {
	return filepath.Join(d.cfg.StateDir, strings.ToLower(w.Kind)+"-"+w.Name)
}

func providerKey(w *deploy.Workload) string { return w.Kind + "/" + w.Name }

// provider returns the provider of w, creating its state directory on
// first use.
func (d *Deployer) provider(w *deploy.Workload) (*provider, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	if p := d.providers[providerKey(w)]; p != nil {
		return p, nil
	}
	p := &provider{kind: w.Kind, name: w.Name, dir: d.providerDir(w), creds: map[string]*credentials{}}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create provider state directory: %w", err)
	}
	d.providers[providerKey(w)] = p
	return p, nil
}

// notify tells the caller that something about p changed.
func (d *Deployer) notify(p *provider) {
	if d.opts.onChange != nil {
		d.opts.onChange(p.kind, p.name)
	}
}

// halt starts stopping every process of p and returns what to wait for.
// The caller holds p.mu.
func (d *Deployer) halt(p *provider) []<-chan struct{} {
	var wait []<-chan struct{}
	if a := p.init; a != nil && !a.finished {
		d.stopInit(a)
		wait = append(wait, a.proc.Done())
	}
	if p.run != nil {
		p.run.halt()
		p.retired = append(p.retired, p.run)
		p.run = nil
	}
	p.pruneRetired()
	for _, s := range p.retired {
		wait = append(wait, s.done)
	}
	return wait
}

// Remove stops every process of w's provider (SIGTERM, then SIGKILL after
// the stop timeout) and deletes its credentials and init records; the logs
// stay. It reports done once all processes have exited, and never blocks
// waiting for them.
func (d *Deployer) Remove(ctx context.Context, w *deploy.Workload) (bool, error) {
	d.mu.Lock()
	p := d.providers[providerKey(w)]
	d.mu.Unlock()
	if p != nil {
		p.mu.Lock()
		busy := len(d.halt(p)) > 0
		var errs []error
		if !busy {
			errs = append(errs, p.dropCredentials(roleInit), p.dropCredentials(roleRun))
		}
		p.mu.Unlock()
		if busy {
			return false, nil
		}
		if err := errors.Join(errs...); err != nil {
			return false, err
		}
		d.mu.Lock()
		if d.providers[providerKey(w)] == p {
			delete(d.providers, providerKey(w))
		}
		d.mu.Unlock()
	}
	// Also what an earlier Deployer on this directory left behind.
	if err := removeState(d.providerDir(w)); err != nil {
		return false, err
	}
	return true, nil
}

// removeState deletes credentials and init records from a provider
// directory.
func removeState(dir string) error {
	var errs []error
	for _, pattern := range []string{"*.token", "*.kubeconfig", "ca.crt", "init-*.done"} {
		files, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove provider state: %w", err)
	}
	return nil
}

// Close stops every process the Deployer started, waits until they have
// exited and deletes their credentials. Init records stay, so that a new
// Deployer on the same state directory does not run init again. After
// Close, Init, Run and Remove fail.
func (d *Deployer) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	providers := make([]*provider, 0, len(d.providers))
	for _, p := range d.providers {
		providers = append(providers, p)
	}
	d.mu.Unlock()

	var wait []<-chan struct{}
	for _, p := range providers {
		p.mu.Lock()
		wait = append(wait, d.halt(p)...)
		p.mu.Unlock()
	}
	for _, ch := range wait {
		<-ch
	}
	var errs []error
	for _, p := range providers {
		p.mu.Lock()
		errs = append(errs, p.dropCredentials(roleInit), p.dropCredentials(roleRun))
		p.mu.Unlock()
	}
	d.spawner.Close()
	return errors.Join(errs...)
}
