package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/marketplane/marketplane/internal/landscape/pki"
)

// StateVersion is the version of state.json this package writes and reads.
// A state directory of another version is not reused.
const StateVersion = 1

// Phase is the phase of the whole landscape, as recorded in state.json.
type Phase string

// Phases of a landscape.
const (
	// PhaseStarting: a supervisor is starting the landscape.
	PhaseStarting Phase = "Starting"
	// PhaseReady: everything is up.
	PhaseReady Phase = "Ready"
	// PhaseStopping: the supervisor is stopping the landscape.
	PhaseStopping Phase = "Stopping"
	// PhaseStopped: the landscape was stopped; its data is kept and the
	// next start reuses it. State.StoppedAt tells a stop on purpose from
	// one after a failure.
	PhaseStopped Phase = "Stopped"
)

// ClusterPhase is the phase of one cluster's record.
type ClusterPhase string

// Phases of a cluster.
const (
	// ClusterStarting: the cluster's processes are being started.
	ClusterStarting ClusterPhase = "Starting"
	// ClusterRunning: the cluster answered and is registered.
	ClusterRunning ClusterPhase = "Running"
	// ClusterReleasing: the cluster is being removed with its data.
	ClusterReleasing ClusterPhase = "Releasing"
)

// State is the content of state.json: what a landscape runs, so that status,
// down and the next up know it without asking the processes.
type State struct {
	// Version is StateVersion.
	Version int `json:"version"`
	// Phase is the landscape's phase.
	Phase Phase `json:"phase"`
	// Supervisor is the process that runs the landscape (marketplane
	// landscape up) while it runs.
	Supervisor *Process `json:"supervisor,omitempty"`
	// StartedAt is when the supervisor started; ReadyAt when it was ready.
	StartedAt *time.Time `json:"startedAt,omitempty"`
	ReadyAt   *time.Time `json:"readyAt,omitempty"`
	// StoppedAt is when the landscape was stopped on purpose (`landscape
	// stop`, Ctrl-C, SIGTERM), so that status can tell it from one that
	// failed or crashed; a start clears it.
	StoppedAt *time.Time `json:"stoppedAt,omitempty"`
	// Etcd is the one etcd all clusters store their data in.
	Etcd Etcd `json:"etcd"`
	// Clusters are the clusters by name: the landscape's own (platform,
	// onboarding, workload) and those the local cluster provider created.
	Clusters map[string]*Cluster `json:"clusters,omitempty"`
	// Processes are further processes a landscape step started (e.g. the
	// broker), stopped by down like the others.
	Processes map[string]*Process `json:"processes,omitempty"`
	// Endpoints are further addresses a landscape step serves (e.g. the
	// broker's URL), for status and the summary.
	Endpoints map[string]string `json:"endpoints,omitempty"`
	// MCPBackend is what serves the clusters of ManagedControlPlanes:
	// "apiserver" (a kube-apiserver each; empty means that too) or "kcp"
	// (a kcp workspace each). A resumed landscape keeps it.
	MCPBackend string `json:"mcpBackend,omitempty"`
	// KCP is the kcp server of a landscape whose MCPBackend is "kcp".
	KCP *KCP `json:"kcp,omitempty"`
}

// KCP is the record of the kcp server: its loopback ports (none of kcp's
// defaults 6443, 2379, 2380), its data and its admin kubeconfig.
type KCP struct {
	// SecurePort serves kcp's API; EtcdClientPort and EtcdPeerPort are
	// those of its embedded etcd.
	SecurePort     int `json:"securePort"`
	EtcdClientPort int `json:"etcdClientPort"`
	EtcdPeerPort   int `json:"etcdPeerPort"`
	// RootDir is its --root-directory: its etcd data, certificates and
	// admin kubeconfig.
	RootDir string `json:"rootDir"`
	// Kubeconfig is the admin kubeconfig kcp writes (context root).
	Kubeconfig string `json:"kubeconfig"`
	// Process is the running kcp, if any.
	Process *Process `json:"process,omitempty"`
}

// Etcd is the record of the etcd.
type Etcd struct {
	// ClientPort and PeerPort are its loopback ports.
	ClientPort int `json:"clientPort"`
	PeerPort   int `json:"peerPort"`
	// DataDir is its data directory.
	DataDir string `json:"dataDir"`
	// Process is the running etcd, if any.
	Process *Process `json:"process,omitempty"`
}

// Cluster is the record of one cluster.
type Cluster struct {
	// Name is the cluster's name, also the name of its Cluster object for
	// a provisioned cluster.
	Name string `json:"name"`
	// Port is the API server's loopback port. It may change when the
	// landscape resumes and the port is taken (MoveTakenPorts).
	Port int `json:"port"`
	// ServiceAccountIssuer is the API server's --service-account-issuer:
	// the URL of the port it first ran on, kept when the port moves so that
	// service-account tokens issued before stay valid. Empty means the URL
	// of Port.
	ServiceAccountIssuer string `json:"serviceAccountIssuer,omitempty"`
	// EtcdPrefix is the API server's --etcd-prefix.
	EtcdPrefix string `json:"etcdPrefix"`
	// Kubeconfig is the path of the admin kubeconfig.
	Kubeconfig string `json:"kubeconfig"`
	// Phase is the cluster's phase.
	Phase ClusterPhase `json:"phase"`
	// Request is set for a cluster the local cluster provider created.
	Request *RequestRef `json:"request,omitempty"`
	// APIServer and ControllerManager are its running processes, if any.
	APIServer         *Process `json:"apiServer,omitempty"`
	ControllerManager *Process `json:"controllerManager,omitempty"`
	// Scheduler and Kwok run the simulated nodes of a cluster that runs
	// workloads (see WithWorkloads), if any.
	Scheduler *Process `json:"scheduler,omitempty"`
	Kwok      *Process `json:"kwok,omitempty"`
}

// RequestRef identifies the ClusterRequest a cluster was provisioned for.
type RequestRef struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	UID       string   `json:"uid"`
	Purposes  []string `json:"purposes,omitempty"`
}

// Process is the record of a running process.
type Process struct {
	// Name identifies the process, e.g. kube-apiserver-platform.
	Name string `json:"name"`
	// Binary is the executable as its command line names it: the absolute
	// path for processes a Runner starts.
	Binary string `json:"binary"`
	// PID and StartTime (in clock ticks since boot, /proc/<pid>/stat)
	// identify the process; a PID alone could have been reused.
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	// Log is the file its output goes to.
	Log string `json:"log,omitempty"`
	// Restarts counts how often the landscape started the process again
	// after it exited on its own (crashed, was killed) during this run of
	// the landscape.
	Restarts int `json:"restarts,omitempty"`
	// LastExit says how the process last exited on its own, e.g. "ended
	// (signal: killed)" or "exited with code 1", and LastExitAt when.
	LastExit   string     `json:"lastExit,omitempty"`
	LastExitAt *time.Time `json:"lastExitAt,omitempty"`
}

// Ports returns every loopback port the state records, with what uses it.
func (s *State) Ports() map[int]string {
	out := map[int]string{}
	if s.Etcd.ClientPort != 0 {
		out[s.Etcd.ClientPort] = "etcd client port"
		out[s.Etcd.PeerPort] = "etcd peer port"
	}
	for _, c := range s.Clusters {
		out[c.Port] = "kube-apiserver of cluster " + c.Name
	}
	if s.KCP != nil {
		out[s.KCP.SecurePort] = "kcp secure port"
		out[s.KCP.EtcdClientPort] = "kcp's etcd client port"
		out[s.KCP.EtcdPeerPort] = "kcp's etcd peer port"
	}
	return out
}

// RecordedProcesses returns every process the state records, the
// supervisor excluded, in stop order: further processes, kcp,
// provisioned clusters, the landscape's clusters, etcd.
func (s *State) RecordedProcesses() []*Process {
	var out []*Process
	for _, p := range s.Processes {
		out = append(out, p)
	}
	if s.KCP != nil {
		out = appendNonNil(out, s.KCP.Process)
	}
	for _, provisioned := range []bool{true, false} {
		for _, c := range s.Clusters {
			if (c.Request != nil) == provisioned {
				out = appendNonNil(out, c.Kwok, c.Scheduler, c.ControllerManager, c.APIServer)
			}
		}
	}
	return appendNonNil(out, s.Etcd.Process)
}

func appendNonNil(out []*Process, ps ...*Process) []*Process {
	for _, p := range ps {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// ErrNoState is returned by ReadState when the directory has no state.json.
var ErrNoState = errors.New("no landscape state")

// ReadState reads <dir>/state.json.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(Layout{Dir: dir}.StateFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoState, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read landscape state: %w", err)
	}
	s := &State{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("parse %s: %w", Layout{Dir: dir}.StateFile(), err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("%s has version %d, this marketplane writes version %d: run 'marketplane landscape down' to start afresh",
			Layout{Dir: dir}.StateFile(), s.Version, StateVersion)
	}
	if s.Clusters == nil {
		s.Clusters = map[string]*Cluster{}
	}
	return s, nil
}

// Store holds the State of a running landscape and writes every change to
// state.json at once (atomically), so that a crash at any point leaves a
// record of everything that was started.
type Store struct {
	path  string
	mu    sync.Mutex
	state *State
}

// NewStore returns a store that writes s to <dir>/state.json.
func NewStore(dir string, s *State) *Store {
	if s.Clusters == nil {
		s.Clusters = map[string]*Cluster{}
	}
	s.Version = StateVersion
	return &Store{path: Layout{Dir: dir}.StateFile(), state: s}
}

// Update changes the state with fn and writes it. When fn fails, nothing
// is written and the in-memory state may be partly changed by fn, so fn
// should check before it changes.
func (s *Store) Update(fn func(*State) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := fn(s.state); err != nil {
		return err
	}
	data, err := json.MarshalIndent(s.state, "", "  ")
	if err != nil {
		return fmt.Errorf("encode landscape state: %w", err)
	}
	return pki.WriteFileAtomic(s.path, append(data, '\n'), 0o600)
}

// Snapshot returns a deep copy of the state.
func (s *Store) Snapshot() *State {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := json.Marshal(s.state)
	if err != nil {
		panic(fmt.Sprintf("encode landscape state: %v", err)) // plain data, cannot fail
	}
	out := &State{}
	if err := json.Unmarshal(data, out); err != nil {
		panic(fmt.Sprintf("decode landscape state: %v", err))
	}
	return out
}

// Layout names the files and directories of a state directory:
//
//	state.json                   the State
//	pki/                         CAs, etcd certificates; pki/<cluster>/ per cluster
//	kubeconfigs/<cluster>.kubeconfig  admin kubeconfigs
//	logs/<process>.log           output of every process
//	etcd/                        etcd's data
type Layout struct {
	// Dir is the state directory, an absolute path.
	Dir string
}

// MarkerFile is created first in every state directory; down and a fresh
// start only ever delete a directory that has it (or is empty), so that a
// mistyped --state-dir cannot remove unrelated files.
const MarkerFile = ".marketplane-landscape"

// StateFile is state.json.
func (l Layout) StateFile() string { return filepath.Join(l.Dir, "state.json") }

// Marker is the MarkerFile.
func (l Layout) Marker() string { return filepath.Join(l.Dir, MarkerFile) }

// LockFile is held (flock) by the supervisor while it runs.
func (l Layout) LockFile() string { return filepath.Join(l.Dir, "lock") }

// PKIDir holds the CAs and etcd's certificates.
func (l Layout) PKIDir() string { return filepath.Join(l.Dir, "pki") }

// ClusterPKIDir holds a cluster's certificates and keys.
func (l Layout) ClusterPKIDir(cluster string) string { return filepath.Join(l.PKIDir(), cluster) }

// KubeconfigDir holds the admin kubeconfigs.
func (l Layout) KubeconfigDir() string { return filepath.Join(l.Dir, "kubeconfigs") }

// Kubeconfig is the admin kubeconfig of a cluster.
func (l Layout) Kubeconfig(cluster string) string {
	return filepath.Join(l.KubeconfigDir(), cluster+".kubeconfig")
}

// LogDir holds the logs.
func (l Layout) LogDir() string { return filepath.Join(l.Dir, "logs") }

// Log is the log file of a process.
func (l Layout) Log(name string) string { return filepath.Join(l.LogDir(), name+".log") }

// EtcdDataDir is etcd's data directory.
func (l Layout) EtcdDataDir() string { return filepath.Join(l.Dir, "etcd") }

// Path returns a path inside the state directory.
func (l Layout) Path(elem ...string) string {
	return filepath.Join(append([]string{l.Dir}, elem...)...)
}
