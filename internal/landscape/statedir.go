package landscape

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/pkg/filelock"
)

// ErrRunning is returned by Start when another supervisor runs the
// landscape of the state directory.
var ErrRunning = errors.New("a landscape is already running in this state directory")

// PrepareStateDir makes dir a landscape state directory (see
// prepareStateDir) and returns its layout.
func PrepareStateDir(dir string) (controlplane.Layout, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return controlplane.Layout{}, fmt.Errorf("state directory %s: %w", dir, err)
	}
	l := controlplane.Layout{Dir: abs}
	return l, prepareStateDir(l)
}

// prepareStateDir creates the state directory with its marker, or checks
// that an existing one is a landscape's (has the marker) or is empty.
func prepareStateDir(l controlplane.Layout) error {
	fi, err := os.Stat(l.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(l.Dir, 0o700); err != nil {
			return fmt.Errorf("create state directory: %w", err)
		}
	case err != nil:
		return fmt.Errorf("state directory: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("state directory %s is not a directory", l.Dir)
	default:
		ours, err := isStateDir(l)
		if err != nil {
			return err
		}
		if !ours {
			return fmt.Errorf("%s is neither empty nor a landscape state directory (it has no %s): choose another --state-dir", l.Dir, controlplane.MarkerFile)
		}
	}
	if err := os.WriteFile(l.Marker(), []byte("This directory holds a Marketplane landscape; 'marketplane landscape stop' stops it and keeps it, 'marketplane landscape down' removes it.\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", l.Marker(), err)
	}
	return os.MkdirAll(l.LogDir(), 0o700)
}

// isStateDir reports whether an existing directory has the marker or is
// empty, that is whether the landscape may write into and remove it.
func isStateDir(l controlplane.Layout) (bool, error) {
	if _, err := os.Stat(l.Marker()); err == nil {
		return true, nil
	}
	entries, err := os.ReadDir(l.Dir)
	if err != nil {
		return false, fmt.Errorf("read state directory: %w", err)
	}
	return len(entries) == 0, nil
}

// lockReleaseWait is how long acquire waits for the lock of a recorded
// supervisor that is no longer alive.
const lockReleaseWait = 30 * time.Second

// acquire takes the state directory's lock for this supervisor. A lock
// held while the recorded supervisor is no longer alive is waited for, up
// to lockReleaseWait: a supervisor killed with SIGKILL shows as a zombie
// as soon as its main thread has exited, but its files (and with them the
// lock) are closed only when its last thread has, which on a busy machine
// can take a moment.
func (l *Landscape) acquire() error {
	deadline := time.Now().Add(lockReleaseWait)
	for {
		f, err := lockFile(l.Layout, syscall.LOCK_NB)
		if err == nil {
			l.lock = f
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		s, serr := controlplane.ReadState(l.Layout.Dir)
		dying := serr == nil && s.Supervisor != nil && !controlplane.Alive(s.Supervisor)
		if dying && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // polling the lock: flock has no timeout
			continue
		}
		msg := fmt.Sprintf("%v: %s", ErrRunning, l.Layout.Dir)
		switch {
		case dying:
			msg += fmt.Sprintf(" (its supervisor, pid %d, has exited, but the lock was still held after %s)", s.Supervisor.PID, lockReleaseWait)
		case serr == nil && s.Supervisor != nil:
			msg += fmt.Sprintf(" (pid %d)", s.Supervisor.PID)
		}
		return fmt.Errorf("%s; 'marketplane landscape status' shows it, 'marketplane landscape stop' stops it: %w", msg, ErrRunning)
	}
}

// release gives the lock up.
func (l *Landscape) release() {
	if l.lock != nil {
		_ = l.lock.Close() // closing drops the flock
		l.lock = nil
	}
}

// lockFile opens and flocks the lock file; flags may add LOCK_NB.
func lockFile(layout controlplane.Layout, flags int) (*os.File, error) {
	return filelock.Lock(layout.LockFile(), flags)
}

// recover returns the state to start from. Without a state.json it is a
// fresh one on free ports (after removing whatever a start that crashed
// before writing its state left). With one, processes of the earlier run
// that are still alive are stopped, and the recorded ports, certificates
// and data are reused; a recorded port another process took meanwhile is
// replaced by a new one, and the progress output says so.
func (l *Landscape) recover() (*controlplane.State, bool, error) {
	prev, err := controlplane.ReadState(l.Layout.Dir)
	if errors.Is(err, controlplane.ErrNoState) {
		s, err := l.fresh()
		return s, false, err
	}
	if err != nil {
		return nil, false, err
	}
	for _, p := range prev.RecordedProcesses() {
		if controlplane.Alive(p) {
			l.progressf("stopping %s (pid %d), left running by an earlier run", p.Name, p.PID)
			if err := controlplane.StopRecorded(p, l.cfg.StopTimeout); err != nil {
				return nil, false, err
			}
		}
	}
	for _, name := range []string{ClusterPlatform, ClusterOnboarding, ClusterWorkload} {
		if prev.Clusters[name] == nil {
			return nil, false, fmt.Errorf("%s records no cluster %s: run 'marketplane landscape down' to start afresh", l.Layout.StateFile(), name)
		}
	}
	s := &controlplane.State{Etcd: prev.Etcd, Clusters: prev.Clusters, MCPBackend: prev.MCPBackend, KCP: prev.KCP}
	s.Etcd.Process = nil
	if s.KCP != nil {
		s.KCP.Process = nil
	}
	for _, c := range s.Clusters {
		c.APIServer, c.ControllerManager = nil, nil
	}
	moves, err := controlplane.MoveTakenPorts(s)
	if err != nil {
		return nil, false, err
	}
	l.progressf("resuming the landscape in %s", l.Layout.Dir)
	for _, m := range moves {
		l.progressf("%s; kubeconfigs and Cluster registrations are rewritten for the new port", m)
	}
	return l.starting(s)
}

// fresh returns the state of a new landscape, with free ports.
func (l *Landscape) fresh() (*controlplane.State, error) {
	entries, err := os.ReadDir(l.Layout.Dir)
	if err != nil {
		return nil, fmt.Errorf("read state directory: %w", err)
	}
	for _, e := range entries {
		switch e.Name() {
		case controlplane.MarkerFile, filepath.Base(l.Layout.LockFile()), filepath.Base(l.Layout.LogDir()):
			continue
		}
		if err := os.RemoveAll(filepath.Join(l.Layout.Dir, e.Name())); err != nil {
			return nil, fmt.Errorf("clean state directory: %w", err)
		}
	}
	ports, err := controlplane.FreePorts(5)
	if err != nil {
		return nil, err
	}
	s := &controlplane.State{
		Etcd:     controlplane.Etcd{ClientPort: ports[0], PeerPort: ports[1], DataDir: l.Layout.EtcdDataDir()},
		Clusters: map[string]*controlplane.Cluster{},
	}
	for i, name := range []string{ClusterPlatform, ClusterOnboarding, ClusterWorkload} {
		s.Clusters[name] = &controlplane.Cluster{
			Name:       name,
			Port:       ports[2+i],
			EtcdPrefix: controlplane.EtcdPrefix(name),
			Kubeconfig: l.Layout.Kubeconfig(name),
			Phase:      controlplane.ClusterStarting,
		}
	}
	l.progressf("creating a new landscape in %s", l.Layout.Dir)
	st, _, err := l.starting(s)
	return st, err
}

// starting marks s as being started by this process.
func (l *Landscape) starting(s *controlplane.State) (*controlplane.State, bool, error) {
	self, err := controlplane.Self()
	if err != nil {
		return nil, false, err
	}
	now := time.Now()
	s.Phase, s.Supervisor, s.StartedAt, s.ReadyAt, s.StoppedAt = controlplane.PhaseStarting, self, &now, nil, nil
	return s, true, nil
}

// fileLogger returns a JSON logger appending to path.
func fileLogger(path string) (logr.Logger, *os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return logr.Logger{}, nil, fmt.Errorf("open operator log: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(f), zapcore.InfoLevel)
	return zapr.NewLogger(zap.New(core)), f, nil
}
