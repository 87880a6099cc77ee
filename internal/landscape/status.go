package landscape

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// Status is what `landscape status` reports.
type Status struct {
	// Dir is the state directory.
	Dir string
	// State is its record.
	State *controlplane.State
	// Running reports whether its supervisor is alive.
	Running bool
}

// Condition says whether a landscape runs and, when it does not, why.
type Condition string

// Conditions of a landscape that has a state.
const (
	// ConditionRunning: its supervisor is alive.
	ConditionRunning Condition = "running"
	// ConditionStopped: it was stopped on purpose (`landscape stop`,
	// Ctrl-C, SIGTERM); its data is kept and `landscape start` resumes it.
	ConditionStopped Condition = "stopped"
	// ConditionFailed: it stopped itself after a failure.
	ConditionFailed Condition = "failed"
	// ConditionCrashed: its supervisor is gone without having stopped it
	// (killed, crashed, the machine restarted).
	ConditionCrashed Condition = "crashed"
)

// Condition returns the landscape's condition.
func (s *Status) Condition() Condition {
	if s.Running {
		return ConditionRunning
	}
	return notRunning(s.State)
}

// notRunning returns why a landscape whose supervisor is not alive does
// not run.
func notRunning(st *controlplane.State) Condition {
	switch {
	case st.Phase == controlplane.PhaseStopped && st.StoppedAt != nil:
		return ConditionStopped
	case st.Phase == controlplane.PhaseStopped:
		return ConditionFailed
	default:
		return ConditionCrashed
	}
}

// describe says in words why a landscape that is not running stopped.
func describe(st *controlplane.State) string {
	switch notRunning(st) {
	case ConditionStopped:
		return "stopped on purpose at " + st.StoppedAt.Local().Format(time.DateTime)
	case ConditionFailed:
		return "it stopped after a failure; logs/" + LogName + ".log says why"
	default:
		what := "its supervisor is gone"
		if st.Supervisor != nil {
			what = "its supervisor, pid " + strconv.Itoa(st.Supervisor.PID) + ", is gone"
		}
		return "unexpectedly: crashed or killed in phase " + string(st.Phase) + ", " + what
	}
}

// ReadStatus reads the status of the landscape in a state directory. It
// returns an error wrapping controlplane.ErrNoState when there is none.
func ReadStatus(stateDir string) (*Status, error) {
	dir, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", stateDir, err)
	}
	s, err := controlplane.ReadState(dir)
	if err != nil {
		return nil, err
	}
	return &Status{Dir: dir, State: s, Running: controlplane.Alive(s.Supervisor)}, nil
}

// Print writes the status as text; with probe, each API server that runs
// is asked for /readyz.
func (s *Status) Print(ctx context.Context, w io.Writer, probe bool) {
	st := s.State
	switch s.Condition() {
	case ConditionRunning:
		fmt.Fprintf(w, "Landscape in %s: running, %s (supervisor pid %d", s.Dir, st.Phase, st.Supervisor.PID)
		if st.ReadyAt != nil {
			fmt.Fprintf(w, ", ready since %s", st.ReadyAt.Local().Format(time.DateTime))
		}
		fmt.Fprintln(w, "); 'marketplane landscape stop' stops it and keeps it, 'marketplane landscape down' removes it")
	case ConditionStopped:
		fmt.Fprintf(w, "Landscape in %s: stopped (%s), its data kept; 'marketplane landscape start' resumes it, 'marketplane landscape down' removes it\n",
			s.Dir, describe(st))
	default:
		fmt.Fprintf(w, "Landscape in %s: not running (%s); 'marketplane landscape start' (or 'up') resumes it, 'marketplane landscape down' removes it\n",
			s.Dir, describe(st))
	}
	rows := [][]string{{"CLUSTER", "API SERVER", "PHASE", "PROCESSES", "KUBECONFIG"}}
	names := make([]string, 0, len(st.Clusters))
	for name := range st.Clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := st.Clusters[name]
		api := "https://127.0.0.1:" + strconv.Itoa(c.Port)
		if probe && controlplane.Alive(c.APIServer) {
			api += " (" + readyz(ctx, c.Kubeconfig) + ")"
		}
		phase := string(c.Phase)
		if c.Request != nil {
			phase += " for ClusterRequest " + c.Request.Namespace + "/" + c.Request.Name
		}
		procs := []*controlplane.Process{c.APIServer, c.ControllerManager}
		if c.Scheduler != nil || c.Kwok != nil {
			// A cluster that runs (simulated) workloads.
			procs = append(procs, c.Scheduler, c.Kwok)
		}
		rows = append(rows, []string{name, api, phase, s.procState(procs...), c.Kubeconfig})
	}
	rows = append(rows, []string{"etcd", "https://127.0.0.1:" + strconv.Itoa(st.Etcd.ClientPort), "", s.procState(st.Etcd.Process), st.Etcd.DataDir})
	if k := st.KCP; k != nil {
		api := "https://127.0.0.1:" + strconv.Itoa(k.SecurePort)
		if probe && controlplane.Alive(k.Process) {
			api += " (" + kcpReadyz(ctx, k) + ")"
		}
		rows = append(rows, []string{KCPProcess, api, "", s.procState(k.Process), k.Kubeconfig})
	}
	writeTable(w, rows)
	fmt.Fprintf(w, "MCP backend: %s\n", describeBackend(st))
	if len(st.Processes) > 0 {
		fmt.Fprintln(w, "Processes:")
		leader := OperatorLeader(st)
		for _, name := range slices.Sorted(maps.Keys(st.Processes)) {
			p := st.Processes[name]
			role := ""
			if name == leader {
				role = " (leader)"
			}
			fmt.Fprintf(w, "  %s%s: %s, log %s\n", name, role, s.procState(p), p.Log)
		}
	}
	s.printRestarts(w)
	if probe {
		s.printProviders(ctx, w)
	}
	if len(st.Endpoints) > 0 {
		fmt.Fprintln(w, "Endpoints:")
		for name, url := range st.Endpoints {
			fmt.Fprintf(w, "  %s: %s\n", name, url)
		}
	}
}

// describeBackend names the backend of a landscape's MCPs and what an
// MCP is there.
func describeBackend(st *controlplane.State) string {
	if st.MCPBackend == BackendKCP {
		return BackendKCP + " (every MCP is a workspace of kcp; no Pods run there)"
	}
	return BackendAPIServer + " (every MCP is a kube-apiserver of its own)"
}

// procState says whether recorded processes run, and how often they were
// restarted.
func (s *Status) procState(ps ...*controlplane.Process) string {
	out := ""
	for _, p := range ps {
		if out != "" {
			out += ", "
		}
		switch {
		case p == nil:
			out += "stopped"
		case controlplane.Alive(p):
			out += "pid " + strconv.Itoa(p.PID)
		case s.Running && p.LastExit != "":
			// Exited on its own; the supervisor restarts it after a
			// backoff.
			out += "restarting (was pid " + strconv.Itoa(p.PID) + ")"
		default:
			out += "dead (pid " + strconv.Itoa(p.PID) + ")"
		}
		if p != nil && p.Restarts > 0 {
			out += " (" + restarts(p.Restarts) + ")"
		}
	}
	return out
}

// printRestarts lists the processes that exited on their own during this
// run of the landscape: how often each was restarted and how it last
// exited, so that a process crashing in a loop stands out.
func (s *Status) printRestarts(w io.Writer) {
	var lines []string
	for _, p := range s.State.RecordedProcesses() {
		if p.LastExit == "" && p.Restarts == 0 {
			continue
		}
		line := fmt.Sprintf("  %s: %s, last exit: %s", p.Name, restarts(p.Restarts), p.LastExit)
		if p.LastExitAt != nil {
			line += " at " + p.LastExitAt.Local().Format(time.DateTime)
		}
		lines = append(lines, line+", log "+p.Log)
	}
	if len(lines) == 0 {
		return
	}
	slices.Sort(lines)
	fmt.Fprintln(w, "Restarted processes (they exited on their own and were started again):")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// restarts says "1 restart", "2 restarts".
func restarts(n int) string {
	if n == 1 {
		return "1 restart"
	}
	return strconv.Itoa(n) + " restarts"
}

// readyz asks an API server for /readyz with the admin kubeconfig.
func readyz(ctx context.Context, kubeconfig string) string {
	return readyzAt(ctx, kubeconfig, "")
}

// readyzAt asks for /readyz with the kubeconfig's credentials at host, or
// at the kubeconfig's server when host is "".
func readyzAt(ctx context.Context, kubeconfig, host string) string {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "no kubeconfig"
	}
	if host != "" {
		cfg.Host = host
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err.Error()
	}
	hc.Timeout = 3 * time.Second
	if err := controlplane.Readyz(ctx, hc, cfg.Host); err != nil {
		return "not ready"
	}
	return "ready"
}

// printProviders lists the providers of the platform cluster with their
// state and, beneath each, the conditions that say what stops it (a
// denied request names the request and the policy rule). It prints
// nothing while the platform API server does not run.
func (s *Status) printProviders(ctx context.Context, w io.Writer) {
	c := s.State.Clusters[ClusterPlatform]
	if !s.Running || c == nil || !controlplane.Alive(c.APIServer) {
		return
	}
	r := &treeReader{clients: map[string]client.Client{}, errs: map[string][]string{}}
	cl, err := adminClient(c.Kubeconfig)
	if err != nil {
		fmt.Fprintf(w, "Providers: %v\n", err)
		return
	}
	r.clients[ClusterPlatform] = cl
	var providers []unstructured.Unstructured
	for _, gvk := range providerKinds {
		providers = append(providers, r.list(ctx, ClusterPlatform, gvk)...)
	}
	if len(providers) == 0 && len(r.errs[ClusterPlatform]) == 0 {
		return
	}
	fmt.Fprintln(w, "Providers:")
	for _, e := range r.errs[ClusterPlatform] {
		fmt.Fprintf(w, "  %s\n", e)
	}
	for _, p := range providers {
		fmt.Fprintf(w, "  %s %s: %s\n", p.GetKind(), p.GetName(), objectState(p))
		for _, cond := range providerProblems(p) {
			fmt.Fprintf(w, "    %s=False (%s): %s\n", cond.Type, cond.Reason, cond.Message)
		}
	}
}
