package process

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// runSet is the set of run processes for one spec of a provider.
type runSet struct {
	// key identifies the spec (runSpecKey).
	key      string
	replicas []*replica
	// stop is closed to stop the set; done once every process of it has
	// exited and no more will start.
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// halt starts stopping the set.
func (s *runSet) halt() { s.stopOnce.Do(func() { close(s.stop) }) }

func (s *runSet) finished() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// replica is one supervised run process.
type replica struct {
	podName string
	cmd     command

	mu        sync.Mutex
	running   bool
	startedAt time.Time
	// endpoints are where the running process listens.
	endpoints []endpoint
	// restarts counts restarts since the set started; lastExit says how
	// the previous process ended and nextStart when the next one starts.
	restarts  int32
	lastExit  string
	nextStart time.Time
}

// pruneRetired forgets retired sets that have stopped. The caller holds
// p.mu.
func (p *provider) pruneRetired() {
	kept := p.retired[:0]
	for _, s := range p.retired {
		if !s.finished() {
			kept = append(kept, s)
		}
	}
	p.retired = kept
}

// Run makes sure w.Replicas run processes of w's current spec are running
// and reports Ready once each has stayed up for the ready grace period. A
// change of the spec (generation, binary, args, env, replicas, service
// account) stops the old processes and starts new ones once the old have
// exited. Run refuses to start anything before init succeeded for
// w.Generation.
func (d *Deployer) Run(ctx context.Context, w *deploy.Workload) (deploy.RunStatus, error) {
	if err := validateWorkload(w); err != nil {
		return deploy.RunStatus{Message: err.Error()}, nil
	}
	binary, err := d.cfg.Images.Binary(w.Image)
	if err != nil {
		return deploy.RunStatus{Message: err.Error()}, nil
	}
	p, err := d.provider(w)
	if err != nil {
		return deploy.RunStatus{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.initSucceeded(w) {
		return deploy.RunStatus{Message: fmt.Sprintf("init has not succeeded for generation %d", w.Generation)}, nil
	}
	// Found out before the first start, so that the first status says it.
	_, nsErr := d.namespaceFile(ctx)
	if key := runSpecKey(w, binary); p.run == nil || p.run.key != key {
		kubeconfig, err := d.ensureCredentials(ctx, p, roleRun, w.Namespace, w.RunServiceAccount)
		if err != nil {
			return deploy.RunStatus{}, fmt.Errorf("credentials for run of %s: %w", providerKey(w), err)
		}
		var after <-chan struct{}
		if old := p.run; old != nil {
			logr.FromContextOrDiscard(ctx).V(1).Info("Restarting run processes with a new spec", "provider", providerKey(w))
			old.halt()
			p.retired = append(p.retired, old)
			after = old.done
		}
		p.run = d.startRunSet(ctx, p, w, binary, key, kubeconfig, after)
	}
	p.pruneRetired()
	return p.runStatus(d.clock.Now(), d.opts.readyGrace, nsErr), nil
}

// startRunSet starts supervising the run processes of w, once after is
// closed (the previous set has stopped). The caller holds p.mu.
func (d *Deployer) startRunSet(ctx context.Context, p *provider, w *deploy.Workload, binary, key, kubeconfig string, after <-chan struct{}) *runSet {
	s := &runSet{key: key, stop: make(chan struct{}), done: make(chan struct{})}
	args := runArgs(w)
	for i := range int(w.Replicas) {
		podName := runPodName(w, i)
		s.replicas = append(s.replicas, &replica{
			podName: podName,
			cmd: command{
				binary:    binary,
				args:      args,
				env:       d.environment(w, podName, w.RunServiceAccount, kubeconfig),
				dir:       p.dir,
				logPath:   filepath.Join(p.dir, fmt.Sprintf("%s-%d.log", roleRun, i)),
				header:    fmt.Sprintf("run generation %d %s", w.Generation, podName),
				namespace: w.Namespace,
				tokenFile: p.tokenPath(roleRun),
				caFile:    d.caFile(p),
			},
		})
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("provider", providerKey(w), "generation", w.Generation)
	bg := logr.NewContext(context.WithoutCancel(ctx), log)
	var wg sync.WaitGroup
	for _, r := range s.replicas {
		wg.Go(func() { d.supervise(bg, p, s, r, after) })
	}
	go func() {
		wg.Wait()
		close(s.done)
		d.notify(p)
	}()
	return s
}

// start starts a process of replica r with free ports for its listen
// flags, and returns it with the endpoints it was told to listen on; the
// caller releases them once the process has exited.
func (d *Deployer) start(ctx context.Context, r *replica) (*supervisor.Process, []endpoint, error) {
	args, eps, err := assignListenAddresses(r.cmd.args, d.ports.get)
	if err != nil {
		return nil, nil, err
	}
	c := r.cmd
	c.args = args
	c.header = fmt.Sprintf("%s: %s %s", r.cmd.header, c.binary, strings.Join(args, " "))
	proc, err := d.startProcess(ctx, c)
	if err != nil {
		d.ports.release(eps)
		return nil, nil, err
	}
	return proc, eps, nil
}

// supervise keeps replica r running until s is stopped, restarting it with
// backoff when it exits or cannot start.
func (d *Deployer) supervise(ctx context.Context, p *provider, s *runSet, r *replica, after <-chan struct{}) {
	log := logr.FromContextOrDiscard(ctx).WithValues("pod", r.podName)
	if after != nil {
		select {
		case <-after:
		case <-s.stop:
			return
		}
	}
	pol := supervisor.RestartPolicy{
		// A negative wait from WithRestartBackoff restarts at once.
		Backoff:     func(n int) time.Duration { return max(d.opts.restartBackoff(int32(n)), 0) },
		StableAfter: stableAfter,
	}
	waiting := func(wait time.Duration) {
		r.mu.Lock()
		r.restarts++
		r.nextStart = d.clock.Now().Add(wait)
		r.mu.Unlock()
		d.notify(p)
	}
	supervisor.KeepRunning(d.clock, s.stop, pol, func() supervisor.Run { return d.runOnce(ctx, log, p, s, r) }, waiting)
}

// runOnce starts a process of replica r and waits until it exits or s is
// stopped.
func (d *Deployer) runOnce(ctx context.Context, log logr.Logger, p *provider, s *runSet, r *replica) supervisor.Run {
	proc, eps, err := d.start(ctx, r)
	if err != nil {
		log.Error(err, "Starting a run process failed")
		r.mu.Lock()
		r.lastExit = "could not start: " + err.Error()
		r.mu.Unlock()
		return supervisor.Run{}
	}
	// Info, not V(1): the ports are free ones, and this is where a
	// developer finds them besides the provider's status.
	log.Info("Started a run process", "pid", proc.PID, "listen", describeEndpoints(eps))
	r.mu.Lock()
	r.running, r.startedAt, r.endpoints = true, proc.Started, eps
	r.mu.Unlock()
	stopped := d.watch(p, s, r, proc)
	d.ports.release(eps)
	if stopped {
		return supervisor.Run{Stopped: true}
	}
	log.Info("A run process ended; restarting it", "exit", proc.DescribeExit())
	return supervisor.Run{Started: proc.Started}
}

// watch waits until proc exits (false) or s is stopped (true, once proc
// has been terminated). It notifies when proc has stayed up for the ready
// grace period, as run may be ready then.
func (d *Deployer) watch(p *provider, s *runSet, r *replica, proc *supervisor.Process) (stopped bool) {
	grace := d.clock.NewTimer(d.opts.readyGrace)
	defer grace.Stop()
	for {
		select {
		case <-grace.C():
			d.notify(p)
		case <-proc.Done():
			r.mu.Lock()
			r.running = false
			r.lastExit = proc.DescribeExit()
			if tail := proc.OutputTail(tailLines, tailBytes); tail != "" {
				r.lastExit += "; last output: " + tail
			}
			r.mu.Unlock()
			return false
		case <-s.stop:
			proc.Stop(d.opts.stopTimeout)
			r.mu.Lock()
			r.running = false
			r.mu.Unlock()
			return true
		}
	}
}

// runStatus summarises the current run set: how many processes are ready,
// why the others are not, where the running ones listen (their ports are
// free ones, so this is where users find them) and, with nsErr, that
// processes start without the service-account namespace file. The caller
// holds p.mu.
func (p *provider) runStatus(now time.Time, grace time.Duration, nsErr error) deploy.RunStatus {
	if len(p.retired) > 0 {
		return deploy.RunStatus{Message: "stopping the run processes of the previous spec"}
	}
	ready := 0
	var problems, listen []string
	for _, r := range p.run.replicas {
		r.mu.Lock()
		if r.running && len(r.endpoints) > 0 {
			listen = append(listen, r.podName+" listens on "+describeEndpoints(r.endpoints))
		}
		switch {
		case r.running && now.Sub(r.startedAt) >= grace:
			ready++
		case !r.running && r.lastExit != "":
			problems = append(problems, fmt.Sprintf("%s %s; restart %d in %s",
				r.podName, r.lastExit, r.restarts, max(r.nextStart.Sub(now), 0).Round(time.Second)))
		}
		r.mu.Unlock()
	}
	n := len(p.run.replicas)
	var msg string
	if ready == n {
		msg = fmt.Sprintf("%d/%d run processes up", ready, n)
	} else {
		msg = fmt.Sprintf("%d/%d run processes ready", ready, n)
		if len(problems) > 0 {
			msg += ": " + problems[0]
			if len(problems) > 1 {
				msg += fmt.Sprintf(" (and %d more)", len(problems)-1)
			}
		}
	}
	for _, l := range listen {
		msg += "; " + l
	}
	if nsErr != nil {
		msg += "; " + nsErr.Error()
	}
	return deploy.RunStatus{Ready: ready == n, Message: msg, Crashing: len(problems) > 0}
}
