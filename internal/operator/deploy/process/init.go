package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// initAttempt is one run of a provider's init command. Its fields are
// guarded by the provider's mutex.
type initAttempt struct {
	uid        types.UID
	generation int64
	attempt    int32
	binary     string
	// proc is nil when the process could not start.
	proc     *supervisor.Process
	stopping bool

	finished   bool
	succeeded  bool
	finishedAt time.Time
	// message says why the attempt failed.
	message string
}

// matches reports whether a is an attempt for w's object and generation.
func (a *initAttempt) matches(w *deploy.Workload) bool {
	return a.uid == w.Owner.UID && a.generation == w.Generation
}

// initRecord is the content of init-<generation>.done.
type initRecord struct {
	UID         types.UID `json:"uid,omitempty"`
	Generation  int64     `json:"generation"`
	Attempt     int32     `json:"attempt"`
	Binary      string    `json:"binary"`
	CompletedAt time.Time `json:"completedAt"`
}

func (p *provider) initRecordPath(generation int64) string {
	return filepath.Join(p.dir, fmt.Sprintf("init-%d.done", generation))
}

// readInitRecord returns the record of a successful init for w's object and
// generation, if there is one.
func (p *provider) readInitRecord(w *deploy.Workload) (initRecord, bool) {
	data, err := os.ReadFile(p.initRecordPath(w.Generation))
	if err != nil {
		return initRecord{}, false
	}
	var r initRecord
	if err := json.Unmarshal(data, &r); err != nil || r.Generation != w.Generation || r.UID != w.Owner.UID {
		return initRecord{}, false
	}
	return r, true
}

// writeInitRecord records a successful init and drops the records of other
// generations.
func (p *provider) writeInitRecord(r initRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	path := p.initRecordPath(r.Generation)
	if err := writeFileAtomic(path, data); err != nil {
		return fmt.Errorf("record init success: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(p.dir, "init-*.done"))
	for _, f := range old {
		if f != path {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove old init record: %w", err)
			}
		}
	}
	return nil
}

// initSucceeded reports whether init succeeded for w's generation.
func (p *provider) initSucceeded(w *deploy.Workload) bool {
	if a := p.init; a != nil && a.matches(w) && a.succeeded {
		return true
	}
	_, ok := p.readInitRecord(w)
	return ok
}

// Init runs w's init command once for w.Generation: it starts the process
// in the background and reports InitRunning, then InitSucceeded (recorded
// in the state directory) or InitFailed with the exit code and the last
// lines of the output; a failed attempt is retried once the init backoff
// has passed. An image without a binary, or an env entry with valueFrom, is
// InitFailed with a message and no retry. Errors are transient (for
// example the TokenRequest failed).
func (d *Deployer) Init(ctx context.Context, w *deploy.Workload) (deploy.InitStatus, error) {
	if err := validateWorkload(w); err != nil {
		return deploy.InitStatus{State: deploy.InitFailed, Message: err.Error()}, nil
	}
	binary, err := d.cfg.Images.Binary(w.Image)
	if err != nil {
		return deploy.InitStatus{State: deploy.InitFailed, Message: err.Error()}, nil
	}
	p, err := d.provider(w)
	if err != nil {
		return deploy.InitStatus{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()

	a := p.init
	if a != nil && !a.matches(w) {
		if !a.finished {
			d.stopInit(a)
			return deploy.InitStatus{
				State:      deploy.InitPending,
				Message:    fmt.Sprintf("stopping the init of generation %d", a.generation),
				RetryAfter: d.opts.pollInterval,
			}, nil
		}
		a = nil
	}
	if a == nil {
		if r, ok := p.readInitRecord(w); ok {
			return deploy.InitStatus{State: deploy.InitSucceeded, Message: "init completed", Attempt: r.Attempt}, nil
		}
		return d.startInit(ctx, p, w, binary, 1)
	}
	switch {
	case !a.finished:
		return deploy.InitStatus{
			State:      deploy.InitRunning,
			Message:    fmt.Sprintf("init attempt %d is running", a.attempt),
			Attempt:    a.attempt,
			RetryAfter: d.opts.pollInterval,
		}, nil
	case a.succeeded:
		return deploy.InitStatus{State: deploy.InitSucceeded, Message: "init completed", Attempt: a.attempt}, nil
	}
	if wait := d.opts.initBackoff(a.attempt) - d.clock.Since(a.finishedAt); wait > 0 {
		return deploy.InitStatus{State: deploy.InitFailed, Message: a.message, Attempt: a.attempt, RetryAfter: wait}, nil
	}
	is, err := d.startInit(ctx, p, w, binary, a.attempt+1)
	is.PreviousFailure = a.message
	return is, err
}

// startInit starts init attempt n. The caller holds p.mu.
func (d *Deployer) startInit(ctx context.Context, p *provider, w *deploy.Workload, binary string, n int32) (deploy.InitStatus, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("provider", providerKey(w), "generation", w.Generation, "attempt", n)
	kubeconfig, err := d.ensureCredentials(ctx, p, roleInit, w.Namespace, w.InitServiceAccount)
	if err != nil {
		return deploy.InitStatus{}, fmt.Errorf("credentials for init of %s: %w", providerKey(w), err)
	}
	args := initArgs(w)
	a := &initAttempt{uid: w.Owner.UID, generation: w.Generation, attempt: n, binary: binary}
	p.init = a
	proc, err := d.startProcess(logr.NewContext(ctx, log), command{
		binary:    binary,
		args:      args,
		env:       d.environment(w, w.InitName, w.InitServiceAccount, kubeconfig),
		dir:       p.dir,
		logPath:   filepath.Join(p.dir, roleInit+".log"),
		header:    fmt.Sprintf("init generation %d attempt %d: %s %s", w.Generation, n, binary, strings.Join(args, " ")),
		namespace: w.Namespace,
		tokenFile: p.tokenPath(roleInit),
		caFile:    d.caFile(p),
	})
	if err != nil {
		a.finished, a.finishedAt = true, d.clock.Now()
		a.message = fmt.Sprintf("init attempt %d could not start: %v", n, err)
		log.Error(err, "Starting init failed")
		if err := p.dropCredentials(roleInit); err != nil {
			log.Error(err, "Removing init credentials failed")
		}
		return deploy.InitStatus{State: deploy.InitFailed, Message: a.message, Attempt: n, RetryAfter: d.opts.initBackoff(n)}, nil
	}
	a.proc = proc
	log.V(1).Info("Started init", "pid", proc.PID)
	go d.awaitInit(context.WithoutCancel(ctx), p, a)
	return deploy.InitStatus{
		State:      deploy.InitRunning,
		Message:    fmt.Sprintf("init attempt %d is running", n),
		Attempt:    n,
		RetryAfter: d.opts.pollInterval,
	}, nil
}

// awaitInit records how init attempt a ended.
func (d *Deployer) awaitInit(ctx context.Context, p *provider, a *initAttempt) {
	<-a.proc.Done()
	log := logr.FromContextOrDiscard(ctx).WithValues("provider", p.kind+"/"+p.name, "generation", a.generation, "attempt", a.attempt)
	p.mu.Lock()
	a.finished, a.finishedAt = true, d.clock.Now()
	if a.proc.ExitCode() == 0 && !a.stopping {
		a.succeeded = true
		log.V(1).Info("Init completed")
		err := p.writeInitRecord(initRecord{
			UID: a.uid, Generation: a.generation, Attempt: a.attempt, Binary: a.binary, CompletedAt: a.finishedAt.UTC(),
		})
		if err != nil {
			// Init stays done for this Deployer; a restarted operator runs
			// it again, which init commands must tolerate anyway.
			log.Error(err, "Recording init success failed")
		}
	} else {
		a.message = fmt.Sprintf("init %s (attempt %d)", a.proc.DescribeExit(), a.attempt)
		if tail := a.proc.OutputTail(tailLines, tailBytes); tail != "" {
			a.message += "; last output: " + tail
		}
		log.V(1).Info("Init failed", "exit", a.proc.DescribeExit())
	}
	if p.init == a {
		if err := p.dropCredentials(roleInit); err != nil {
			log.Error(err, "Removing init credentials failed")
		}
	}
	p.mu.Unlock()
	d.notify(p)
}

// stopInit starts stopping a running init attempt. The caller holds p.mu.
func (d *Deployer) stopInit(a *initAttempt) {
	if a.stopping || a.finished {
		return
	}
	a.stopping = true
	go a.proc.Stop(d.opts.stopTimeout)
}
