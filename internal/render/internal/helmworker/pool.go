package helmworker

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Errors of Pool.Render. The render's context ending returns the context's
// error instead.
var (
	// ErrTimeout: the render ran out of time; its worker was killed.
	ErrTimeout = errors.New("the render ran out of time")
	// ErrMemory: the worker grew beyond the memory ceiling during the
	// render and was killed.
	ErrMemory = errors.New("the render used more memory than its ceiling")
	// ErrCrashed: the worker ended during the render on its own, for
	// example because the Go runtime ran out of memory or stack.
	ErrCrashed = errors.New("the helm render process ended during the render")
	// ErrUnavailable: no worker could be started.
	ErrUnavailable = errors.New("no helm render process could be started")
)

// errStale is the error of a render on a worker that had ended while it was
// idle: the pool retries once on a new worker.
var errStale = errors.New("the worker ended while idle")

// Defaults of a Pool.
const (
	// DefaultStartTimeout bounds how long a new worker may take to greet
	// the pool: starting the binary and running its package initializers,
	// on a loaded machine.
	DefaultStartTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long an unused worker is kept.
	DefaultIdleTimeout = 5 * time.Minute
	// defaultMemoryPoll is how often the pool reads a rendering worker's
	// resident memory.
	defaultMemoryPoll = 20 * time.Millisecond
	// maxKnownCharts bounds the archives the pool remembers having sent a
	// worker; beyond it, it forgets and sends them again.
	maxKnownCharts = 64
)

// Options configure a Pool; zero fields take their defaults.
type Options struct {
	// Size is how many workers may render at once (GOMAXPROCS, at least 2
	// and at most 8). More renders wait for a worker, until their context
	// ends; the wait does not count against the render's time limit.
	Size int
	// StartTimeout bounds the start of a worker (DefaultStartTimeout).
	StartTimeout time.Duration
	// IdleTimeout is how long an unused worker is kept (DefaultIdleTimeout).
	IdleTimeout time.Duration
}

// Pool runs renders in worker processes. It is safe for concurrent use.
type Pool struct {
	slots chan struct{}
	// exe is the binary workers run; empty means the running one. Tests
	// set it to binaries that are no workers.
	exe          string
	startTimeout time.Duration
	idleTimeout  time.Duration
	memoryPoll   time.Duration

	mu   sync.Mutex
	idle []*worker

	started atomic.Int64
	killed  atomic.Int64
}

// New returns a Pool; it starts workers when renders need them.
func New(o Options) *Pool {
	if o.Size <= 0 {
		o.Size = min(max(runtime.GOMAXPROCS(0), 2), 8)
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	return &Pool{
		slots:        make(chan struct{}, o.Size),
		startTimeout: o.StartTimeout,
		idleTimeout:  o.IdleTimeout,
		memoryPoll:   defaultMemoryPoll,
	}
}

// Stats counts a pool's workers.
type Stats struct {
	// Started is how many workers were started.
	Started int64
	// Killed is how many workers were killed because a render ran out of
	// time or memory, or its context ended.
	Killed int64
	// Idle is how many workers are waiting for a render.
	Idle int
}

// Stats returns the counters of p.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Started: p.started.Load(), Killed: p.killed.Load(), Idle: len(p.idle)}
}

// Render renders req in a worker. It fails with ErrTimeout when the render
// takes longer than req.Timeout, with ErrMemory when the worker's resident
// memory exceeds req.MaxMemoryBytes, with the context's error when ctx ends:
// in each case the worker has been killed and waited for when Render
// returns, so nothing of the render goes on.
func (p *Pool) Render(ctx context.Context, req Request) (*Response, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.slots }()
	for attempt := 0; ; attempt++ {
		w, err := p.get(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := p.render(ctx, w, &req)
		if err == nil {
			p.put(w)
			return resp, nil
		}
		if errors.Is(err, errStale) && attempt == 0 {
			continue
		}
		if errors.Is(err, errStale) {
			err = fmt.Errorf("%w: %v", ErrUnavailable, w.exitReason())
		}
		return nil, err
	}
}

// get returns the most recently used idle worker, or starts one.
func (p *Pool) get(ctx context.Context) (*worker, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.idleTimer.Stop()
		return w, nil
	}
	p.mu.Unlock()
	w, err := p.start(ctx)
	if err != nil {
		return nil, err
	}
	p.started.Add(1)
	return w, nil
}

// put keeps w for the next render, for at most the idle timeout.
func (p *Pool) put(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, w)
	w.idleTimer = time.AfterFunc(p.idleTimeout, func() { p.expire(w) })
}

// expire ends w if it is still idle.
func (p *Pool) expire(w *worker) {
	p.mu.Lock()
	i := -1
	for j, v := range p.idle {
		if v == w {
			i = j
		}
	}
	if i >= 0 {
		p.idle = append(p.idle[:i], p.idle[i+1:]...)
	}
	p.mu.Unlock()
	if i >= 0 {
		w.close()
	}
}

// Close ends the idle workers. Workers that are rendering end when their
// render does; Render keeps working after Close, starting new workers.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.idleTimer.Stop()
		w.close()
	}
}

// worker is one worker process and the pool's ends of its pipes.
type worker struct {
	cmd       *exec.Cmd
	requests  *os.File
	buf       *bufio.Writer
	enc       *gob.Encoder
	responses chan Response // closed after the process was waited for
	exited    chan struct{} // closed after the process was waited for
	waitErr   error         // set before exited is closed
	stderr    *headBuffer
	idleTimer *time.Timer
	// charts are the archives the worker was sent (it may have evicted
	// some since).
	charts map[[32]byte]bool
}

// start starts a worker and waits for its greeting.
func (p *Pool) start(ctx context.Context) (*worker, error) {
	if _, ok := os.LookupEnv(EnvVar); ok {
		// A worker serves from init and never gets here; a process that
		// has the variable and gets here is not a worker as it should be.
		// Starting another one could start a chain of them.
		return nil, fmt.Errorf("%w: this process has %s set, but is not serving as a worker", ErrUnavailable, EnvVar)
	}
	exe := p.exe
	if exe == "" {
		var err error
		if exe, err = executable(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	var tokenBytes [16]byte
	if _, err := rand.Read(tokenBytes[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	token := hex.EncodeToString(tokenBytes[:])
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		_ = reqR.Close()
		_ = reqW.Close()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	w := &worker{
		requests:  reqW,
		responses: make(chan Response, 1),
		exited:    make(chan struct{}),
		stderr:    &headBuffer{max: 4 << 10},
		charts:    map[[32]byte]bool{},
	}
	w.buf = bufio.NewWriter(reqW)
	w.enc = gob.NewEncoder(w.buf)
	// The worker gets no environment of the inter-operator's (it may hold
	// credentials) and one processor: a runaway chart burns at most one
	// CPU until it is killed.
	w.cmd = &exec.Cmd{
		Path:       exe,
		Args:       []string{"marketplane-helm-worker"},
		Env:        []string{EnvVar + "=" + token, "GOMAXPROCS=1"},
		Dir:        "/",
		ExtraFiles: []*os.File{reqR, respW}, // fds 3 and 4
		Stderr:     w.stderr,
	}
	err = w.cmd.Start()
	_ = reqR.Close()
	_ = respW.Close()
	if err != nil {
		_ = reqW.Close()
		_ = respR.Close()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	greeted := make(chan error, 1)
	go w.read(respR, token, greeted)

	timer := time.NewTimer(p.startTimeout)
	defer timer.Stop()
	select {
	case err = <-greeted:
	case <-timer.C:
		err = fmt.Errorf("no greeting within %s", p.startTimeout)
	case <-ctx.Done():
		w.kill()
		return nil, ctx.Err()
	}
	if err != nil {
		w.kill()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return w, nil
}

// read receives the worker's greeting and responses until its pipe closes,
// then waits for the process.
func (w *worker) read(r *os.File, token string, greeted chan<- error) {
	defer func() {
		_ = r.Close()
		w.waitErr = w.cmd.Wait()
		close(w.responses)
		close(w.exited)
	}()
	dec := gob.NewDecoder(bufio.NewReader(r))
	var h hello
	if err := dec.Decode(&h); err != nil {
		greeted <- fmt.Errorf("read the greeting: %w", err)
		return
	}
	if h.Token != token {
		greeted <- errors.New("the greeting has the wrong token")
		return
	}
	greeted <- nil
	for {
		var resp Response
		if err := dec.Decode(&resp); err != nil {
			return
		}
		w.responses <- resp
	}
}

// render sends req to w and waits for the response, the time limit, the
// memory ceiling or the end of ctx.
func (p *Pool) render(ctx context.Context, w *worker, req *Request) (*Response, error) {
	select {
	case <-w.exited:
		return nil, errStale
	default:
	}
	timer := time.NewTimer(req.Timeout)
	defer timer.Stop()
	var poll <-chan time.Time
	if req.MaxMemoryBytes > 0 && runtime.GOOS == "linux" {
		t := time.NewTicker(p.memoryPoll)
		defer t.Stop()
		poll = t.C
	}
	r := *req
	if w.charts[r.Key] {
		r.Archive = nil
	}
	if err := w.send(&r); err != nil {
		// The worker ended between the check above and the request.
		w.kill()
		return nil, errStale
	}
	for {
		select {
		case resp, ok := <-w.responses:
			if !ok {
				if w.killedBySignal() {
					// Not by the pool: the system's OOM killer, say, or
					// an operator. Nothing says the chart is at fault.
					return nil, fmt.Errorf("%w: the render process was killed during the render (%s)", ErrUnavailable, w.exitReason())
				}
				return nil, fmt.Errorf("%w: %s", ErrCrashed, w.exitReason())
			}
			if resp.Kind == KindNeedArchive && r.Archive == nil && req.Archive != nil {
				r.Archive = req.Archive
				if err := w.send(&r); err != nil {
					p.kill(w)
					return nil, fmt.Errorf("%w: %s", ErrCrashed, w.exitReason())
				}
				continue
			}
			if len(w.charts) >= maxKnownCharts {
				clear(w.charts)
			}
			w.charts[r.Key] = true
			return &resp, nil
		case <-timer.C:
			p.kill(w)
			return nil, ErrTimeout
		case <-ctx.Done():
			p.kill(w)
			return nil, ctx.Err()
		case <-poll:
			if rss, err := residentBytes(w.cmd.Process.Pid); err == nil && rss > req.MaxMemoryBytes {
				p.kill(w)
				return nil, fmt.Errorf("%w: the render process held %d MiB, more than %d MiB", ErrMemory, rss>>20, req.MaxMemoryBytes>>20)
			}
		}
	}
}

func (p *Pool) kill(w *worker) {
	p.killed.Add(1)
	w.kill()
}

func (w *worker) send(req *Request) error {
	if err := w.enc.Encode(req); err != nil {
		return err
	}
	return w.buf.Flush()
}

// kill kills the worker and waits until it has been reaped.
func (w *worker) kill() {
	_ = w.cmd.Process.Kill()
	<-w.exited
	_ = w.requests.Close()
}

// close asks an idle worker to end, by closing its request pipe, and waits
// for it.
func (w *worker) close() {
	_ = w.requests.Close()
	<-w.exited
}

// killedBySignal reports whether the worker ended by a signal.
func (w *worker) killedBySignal() bool {
	<-w.exited
	st, ok := w.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && st.Signaled()
}

// exitReason says how the worker ended: its exit status and the first line
// of a Go runtime's fatal error (a fixed text that quotes no data, unlike
// the rest of the dump).
func (w *worker) exitReason() string {
	<-w.exited
	reason := "exit status unknown"
	if w.waitErr != nil {
		reason = w.waitErr.Error()
	}
	for _, line := range strings.Split(w.stderr.String(), "\n") {
		if strings.HasPrefix(line, "fatal error: ") || strings.HasPrefix(line, "runtime: out of memory") {
			return reason + ", " + line
		}
	}
	return reason
}

// executable returns the path of the running binary: /proc/self/exe where
// there is one, so that a binary replaced on disk since the process started
// (an upgrade) still starts workers of the running version.
func executable() (string, error) {
	const self = "/proc/self/exe"
	if runtime.GOOS == "linux" {
		if _, err := os.Stat(self); err == nil {
			return self, nil
		}
	}
	return os.Executable()
}

// residentBytes returns the resident memory of the process pid.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("statm of %d: %q", pid, b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// Write implements io.Writer; it never fails, so that the worker's standard
// error is always drained.
func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.b)
}
