package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/stack"
)

// landscapeOptions are the flags of the landscape commands.
type landscapeOptions struct {
	stateDir   string
	binDir     string
	foreground bool
	detached   bool
	// controlPlaneOnly skips the stack (providers, catalog, broker): the
	// control plane and the operator only, for the landscape's own tests
	// and for debugging.
	controlPlaneOnly bool
	startTimeout     time.Duration
	operatorLease    time.Duration
	// imageMaps (IMAGE=BINARY) and imageMapFiles map provider images to
	// local binaries; manifests are applied to the platform cluster.
	imageMaps     []string
	imageMapFiles []string
	manifests     []string
	// mcpBackend serves the MCPs' clusters: apiserver or kcp ("" keeps
	// a resumed landscape's).
	mcpBackend string
}

func newLandscapeCommand() *cobra.Command {
	o := &landscapeOptions{}
	cmd := &cobra.Command{
		Use:   "landscape",
		Short: "Run Marketplane on this machine: etcd, API servers, the operator (up, stop, start, down, status)",
		Long: "The local landscape runs one etcd and real kube-apiservers (with kube-controller-managers) for the\n" +
			"platform, onboarding and workload clusters on loopback ports, registers them, and runs the provider\n" +
			"operator with the process deployer and the local cluster provider (a fresh API server for each MCP).\n" +
			"Everything lives in the state directory: kubeconfigs/, logs/, state.json.\n\n" +
			"'up' creates and starts it (or resumes the one in the state directory); 'stop' stops it and keeps\n" +
			"its data (instances, MCPs, bindings); 'start' resumes a stopped one; 'down' stops it and removes\n" +
			"the state directory; 'status' says whether it runs, was stopped, or crashed.",
	}
	cmd.PersistentFlags().StringVar(&o.stateDir, "state-dir", landscape.DefaultStateDir, "state directory of the landscape")
	cmd.AddCommand(newLandscapeUpCommand(o), newLandscapeStopCommand(o), newLandscapeStartCommand(o),
		newLandscapeDownCommand(o), newLandscapeStatusCommand(o))
	return cmd
}

func newLandscapeUpCommand(o *landscapeOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the landscape (or resume the one in the state directory)",
		Long: "Start the landscape and return once it is ready; it keeps running in the background until\n" +
			"'landscape stop' (which keeps its data) or 'landscape down' (which removes it). With --foreground\n" +
			"it runs in this terminal until Ctrl-C, which stops it and keeps its data. A landscape that was\n" +
			"stopped or crashed is resumed, as 'landscape start' does: what is left of it is stopped and\n" +
			"everything starts again from state.json.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.foreground {
				return runLandscape(cmd.Context(), cmd.OutOrStdout(), o)
			}
			return startDetached(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	addRunFlags(f, o)
	f.StringArrayVar(&o.imageMaps, "image-map", nil, "run the provider image IMAGE from the local binary BINARY: IMAGE=BINARY, IMAGE is repo:tag, repo@digest or repo:* for every tag (repeatable)")
	f.StringArrayVar(&o.imageMapFiles, "image-map-file", nil, "image map file, the format of marketplane-operator --image-map (YAML: images: [{image, binary}]; repeatable)")
	f.StringArrayVar(&o.manifests, "manifest", nil, "YAML file applied to the platform cluster once the landscape runs, e.g. your ServiceProvider and its ProviderConfig; up waits until its providers are Ready (repeatable)")
	f.StringVar(&o.mcpBackend, "mcp-backend", "", "what serves each MCP: "+landscape.BackendAPIServer+" (a kube-apiserver of its own; the default) or "+
		landscape.BackendKCP+" (a workspace of one kcp server, run by the landscape; no Pods run there); a resumed landscape keeps its own")
	f.BoolVar(&o.detached, "detached", false, "set by 'up' for the background process it starts")
	_ = f.MarkHidden("detached")
	return cmd
}

// addRunFlags adds the flags that 'up' and 'start' share: how the
// landscape runs, not what it holds.
func addRunFlags(f *pflag.FlagSet, o *landscapeOptions) {
	f.BoolVar(&o.foreground, "foreground", false, "run in this terminal until Ctrl-C instead of in the background")
	f.StringVar(&o.binDir, "bin-dir", "", "directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (and kwok-stages.yaml) and provider binaries (default: beside this binary, $KUBEBUILDER_ASSETS, or bin/ above the working directory)")
	f.DurationVar(&o.startTimeout, "start-timeout", landscape.DefaultStartTimeout, "how long each part of the start may take")
	f.DurationVar(&o.operatorLease, "operator-lease", landscape.DefaultOperatorLease, "the leader-election lease of the two operator replicas: a leader that cannot renew it within this minus 3s exits (and its providers with it); a killed leader is replaced within about this long (10s: the operator's own defaults)")
	f.BoolVar(&o.controlPlaneOnly, "control-plane-only", false, "start only the control plane and the operator, without providers, catalog and broker")
	_ = f.MarkHidden("control-plane-only")
}

func newLandscapeStopCommand(o *landscapeOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the landscape and keep its state directory; 'start' resumes it",
		Long: "Stop the landscape running in the background (or in another terminal): its supervisor is asked\n" +
			"to stop (SIGTERM) and waited for, then every process of the landscape is gone. The state\n" +
			"directory stays: etcd's data (instances, MCPs, bindings), the PKI, the kubeconfigs. 'landscape\n" +
			"start' resumes it, 'landscape down' removes it. Stopping a landscape that is not running says so.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			progress := newLandscapeProgress(out, isTerminal(out))
			err := landscape.Stop(cmd.Context(), o.stateDir, progress)
			progress.finish(err)
			return err
		},
	}
}

func newLandscapeStartCommand(o *landscapeOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start a stopped landscape from its state directory",
		Long: "Start the landscape of the state directory again, as it was stopped (or left by a crash): the\n" +
			"same clusters, data, certificates and, where free, ports, with the providers and image map of its\n" +
			"last run. It returns once the landscape is ready, which then runs in the background (with\n" +
			"--foreground, in this terminal until Ctrl-C). A directory without a landscape needs 'landscape up';\n" +
			"a landscape that runs already is left as it is.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			st, err := landscape.ReadStatus(o.stateDir)
			switch {
			case errors.Is(err, controlplane.ErrNoState):
				return fmt.Errorf("no landscape in %s to start: 'marketplane landscape up' creates one", o.stateDir)
			case err != nil:
				return err
			case st.Running:
				fmt.Fprintf(out, "The landscape in %s runs already (supervisor pid %d); 'marketplane landscape status' shows it.\n", st.Dir, st.State.Supervisor.PID)
				return nil
			}
			if o.foreground {
				return runLandscape(cmd.Context(), out, o)
			}
			return startDetached(cmd.Context(), out, o)
		},
	}
	addRunFlags(cmd.Flags(), o)
	return cmd
}

// configureLandscape adds the steps beyond the control plane and the
// operator: providers, catalog, broker.
func configureLandscape(l *landscape.Landscape) error { return stack.Configure(l) }

// runLandscape runs the landscape in this process until SIGINT or SIGTERM.
func runLandscape(ctx context.Context, out io.Writer, o *landscapeOptions) error {
	images, err := landscape.UserImages(o.imageMaps, o.imageMapFiles)
	if err != nil {
		return err
	}
	if o.mcpBackend != "" {
		if _, err := landscape.ParseMCPBackend(o.mcpBackend); err != nil {
			return err
		}
	}
	// On a terminal the progress lines become steps with a spinner until
	// the landscape is ready; the detached child writes them plain, for
	// the parent that shows them.
	var progress *landscapeProgress
	if !o.detached && isTerminal(out) {
		progress = newLandscapeProgress(out, true)
		out = progress
	}
	l, err := landscape.New(landscape.Config{
		StateDir:      o.stateDir,
		BinDir:        o.binDir,
		Out:           out,
		StartTimeout:  o.startTimeout,
		OperatorLease: o.operatorLease,
		Detached:      o.detached,
		Images:        images,
		MCPBackend:    o.mcpBackend,
	})
	if err != nil {
		return err
	}
	// Controllers, client-go and klog log to the operator's log file, not
	// to the terminal, which shows progress.
	ctrl.SetLogger(l.Logger())
	klog.SetLogger(l.Logger())
	if !o.controlPlaneOnly {
		if err := configureLandscape(l); err != nil {
			return err
		}
	}
	if err := stack.AddManifests(l, o.manifests); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, the default action returns: a second
		// Ctrl-C ends the process at once (its processes die with it).
		<-ctx.Done()
		stop()
	}()
	if progress != nil {
		stopWatch := watchReady(ctx, l.Layout.Dir, os.Getpid(), func() { progress.finish(nil) })
		defer stopWatch()
	}
	err = l.Run(ctx)
	if progress != nil {
		progress.finish(err)
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	return err
}

// startDetached starts `landscape up --foreground` in a new session with
// its output in logs/landscape.log, shows that output until the landscape
// is ready (or failed), and returns. Ctrl-C meanwhile stops it.
func startDetached(ctx context.Context, out io.Writer, o *landscapeOptions) error {
	args, layout, err := detachedArgs(o)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	logPath := layout.Log("landscape")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", logPath, err)
	}
	defer logFile.Close()
	offset, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("open %s: %w", logPath, err)
	}
	child := exec.Command(exe, args...)
	child.Stdout, child.Stderr = logFile, logFile
	// A session of its own: the terminal's Ctrl-C and hang-up do not reach
	// it once this command has returned.
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return fmt.Errorf("start the landscape: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	tail := &logTail{path: logPath, offset: offset}
	return followStart(ctx, out, layout.Dir, child, exited, tail)
}

// detachedArgs checks the flags, the state directory and the binaries
// and returns the arguments of the background `landscape up` and the
// state directory's layout. Bad flags fail here, before anything is
// created or started, not in the background process; the child gets them
// with absolute paths.
func detachedArgs(o *landscapeOptions) ([]string, controlplane.Layout, error) {
	images, err := landscape.UserImages(o.imageMaps, o.imageMapFiles)
	if err != nil {
		return nil, controlplane.Layout{}, err
	}
	if o.mcpBackend != "" {
		if _, err := landscape.ParseMCPBackend(o.mcpBackend); err != nil {
			return nil, controlplane.Layout{}, err
		}
	}
	manifests, err := absPaths(o.manifests)
	if err != nil {
		return nil, controlplane.Layout{}, err
	}
	if err := stack.CheckManifests(manifests); err != nil {
		return nil, controlplane.Layout{}, err
	}
	layout, err := landscape.PrepareStateDir(o.stateDir)
	if err != nil {
		return nil, layout, err
	}
	if st, err := landscape.ReadStatus(layout.Dir); err == nil && st.Running {
		return nil, layout, fmt.Errorf("%w: %s (pid %d); 'marketplane landscape status' shows it, 'marketplane landscape stop' stops it",
			landscape.ErrRunning, layout.Dir, st.State.Supervisor.PID)
	}
	binDir, err := controlplane.BinDir(o.binDir)
	if err != nil {
		return nil, layout, err
	}
	if _, err := controlplane.FindBinaries(binDir); err != nil {
		return nil, layout, err
	}
	args := []string{"landscape", "up", "--foreground", "--detached",
		"--state-dir=" + layout.Dir, "--bin-dir=" + binDir, "--start-timeout=" + o.startTimeout.String(), "--operator-lease=" + o.operatorLease.String()}
	if o.controlPlaneOnly {
		args = append(args, "--control-plane-only")
	}
	if o.mcpBackend != "" {
		args = append(args, "--mcp-backend="+o.mcpBackend)
	}
	for _, m := range images {
		args = append(args, "--image-map="+m.Image+"="+m.Binary)
	}
	for _, m := range manifests {
		args = append(args, "--manifest="+m)
	}
	return args, layout, nil
}

// followStart shows the started child's log (tail) until the landscape
// of dir is ready and run by child, or the child exited. Ctrl-C stops the
// child and waits for its exit; the end of ctx stops it and returns.
func followStart(ctx context.Context, out io.Writer, dir string, child *exec.Cmd, exited <-chan error, tail *logTail) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	progress := newLandscapeProgress(out, isTerminal(out))
	defer progress.finish(errors.New("stopped"))
	tail.out = progress
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	interrupted := false
	for {
		select {
		case err := <-exited:
			tail.flush()
			progress.finish(errors.New("exited"))
			if interrupted {
				return errors.New("interrupted; the landscape was stopped")
			}
			return fmt.Errorf("the landscape did not start (%w); its output is in %s", err, tail.path)
		case <-sigs:
			if !interrupted {
				interrupted = true
				progress.finish(errors.New("interrupted"))
				fmt.Fprintln(out, "Interrupted: stopping the landscape...")
				_ = child.Process.Signal(syscall.SIGTERM)
			}
		case <-ctx.Done():
			progress.finish(ctx.Err())
			_ = child.Process.Signal(syscall.SIGTERM)
			if err := <-exited; err != nil {
				return fmt.Errorf("%w (the landscape then exited: %w)", ctx.Err(), err)
			}
			return ctx.Err()
		case <-tick.C:
			tail.flush()
			if !interrupted && readyBy(dir, child.Process.Pid) {
				tail.flush()
				progress.finish(nil)
				return nil
			}
		}
	}
}

// readyBy reports whether the landscape of dir records that it is ready
// and run by the process pid.
func readyBy(dir string, pid int) bool {
	st, err := landscape.ReadStatus(dir)
	return err == nil && st.State.Phase == controlplane.PhaseReady &&
		st.State.Supervisor != nil && st.State.Supervisor.PID == pid
}

// watchReady calls ready once the landscape of dir records that it is
// ready and run by the process pid, or never when ctx ends first; the
// function it returns stops the watch.
func watchReady(ctx context.Context, dir string, pid int, ready func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if readyBy(dir, pid) {
					ready()
					return
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// absPaths makes paths absolute against the working directory.
func absPaths(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// logTail copies what is appended to a file to out.
type logTail struct {
	path   string
	offset int64
	out    io.Writer
}

func (t *logTail) flush() {
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return
	}
	n, _ := io.Copy(t.out, f)
	t.offset += n
}

func newLandscapeDownCommand(o *landscapeOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the landscape and remove its state directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			progress := newLandscapeProgress(out, isTerminal(out))
			err := landscape.Down(cmd.Context(), o.stateDir, progress)
			progress.finish(err)
			return err
		},
	}
}

// treeTimeout bounds reading the API servers for `status --tree`.
const treeTimeout = 30 * time.Second

func newLandscapeStatusCommand(o *landscapeOptions) *cobra.Command {
	var tree bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the landscape's clusters, processes and kubeconfigs",
		Long: "Show the landscape's clusters, processes and kubeconfigs from its state directory. With --tree,\n" +
			"draw a compact tree of the clusters and what their API servers hold (read only): the operator,\n" +
			"providers and SFClusters on the platform cluster, control planes with their service objects and\n" +
			"SFServiceInstances on the onboarding cluster, the workload cluster's nodes, and provisioned clusters.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			st, err := landscape.ReadStatus(o.stateDir)
			if errors.Is(err, controlplane.ErrNoState) {
				fmt.Fprintf(out, "No landscape in %s; 'marketplane landscape up' starts one.\n", o.stateDir)
				return nil
			}
			if err != nil {
				return err
			}
			if !tree {
				st.Print(cmd.Context(), out, true)
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), treeTimeout)
			defer cancel()
			for _, line := range landscape.ReadTree(ctx, st).Lines(landscape.TreeLimit) {
				fmt.Fprintln(out, line)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&tree, "tree", false, fmt.Sprintf("draw a compact tree of the clusters and their objects, read from the API servers (at most %d objects of a kind beneath one parent)", landscape.TreeLimit))
	return cmd
}
