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
	// imageMaps (IMAGE=BINARY) and imageMapFiles map provider images to
	// local binaries; manifests are applied to the platform cluster.
	imageMaps     []string
	imageMapFiles []string
	manifests     []string
}

func newLandscapeCommand() *cobra.Command {
	o := &landscapeOptions{}
	cmd := &cobra.Command{
		Use:   "landscape",
		Short: "Run Marketplane on this machine: etcd, API servers, the operator (up, down, status)",
		Long: "The local landscape runs one etcd and real kube-apiservers (with kube-controller-managers) for the\n" +
			"platform, onboarding and workload clusters on loopback ports, registers them, and runs the provider\n" +
			"operator with the process deployer and the local cluster provider (a fresh API server for each MCP).\n" +
			"Everything lives in the state directory: kubeconfigs/, logs/, state.json.",
	}
	cmd.PersistentFlags().StringVar(&o.stateDir, "state-dir", landscape.DefaultStateDir, "state directory of the landscape")
	cmd.AddCommand(newLandscapeUpCommand(o), newLandscapeDownCommand(o), newLandscapeStatusCommand(o))
	return cmd
}

func newLandscapeUpCommand(o *landscapeOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the landscape (or resume the one in the state directory)",
		Long: "Start the landscape and return once it is ready; it keeps running in the background until\n" +
			"'landscape down'. With --foreground it runs in this terminal until Ctrl-C, which stops it and\n" +
			"keeps its data for the next 'up'. A landscape that crashed is resumed: what is left of it is\n" +
			"stopped and everything starts again from state.json.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.foreground {
				return runLandscape(cmd.Context(), cmd.OutOrStdout(), o)
			}
			return startDetached(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.foreground, "foreground", false, "run in this terminal until Ctrl-C instead of in the background")
	f.StringVar(&o.binDir, "bin-dir", "", "directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (and kwok-stages.yaml) and provider binaries (default: beside this binary, $KUBEBUILDER_ASSETS, or bin/ above the working directory)")
	f.DurationVar(&o.startTimeout, "start-timeout", landscape.DefaultStartTimeout, "how long each part of the start may take")
	f.StringArrayVar(&o.imageMaps, "image-map", nil, "run the provider image IMAGE from the local binary BINARY: IMAGE=BINARY, IMAGE is repo:tag, repo@digest or repo:* for every tag (repeatable)")
	f.StringArrayVar(&o.imageMapFiles, "image-map-file", nil, "image map file, the format of marketplane-operator --image-map (YAML: images: [{image, binary}]; repeatable)")
	f.StringArrayVar(&o.manifests, "manifest", nil, "YAML file applied to the platform cluster once the landscape runs, e.g. your ServiceProvider and its ProviderConfig; up waits until its providers are Ready (repeatable)")
	f.BoolVar(&o.detached, "detached", false, "set by 'up' for the background process it starts")
	_ = f.MarkHidden("detached")
	f.BoolVar(&o.controlPlaneOnly, "control-plane-only", false, "start only the control plane and the operator, without providers, catalog and broker")
	_ = f.MarkHidden("control-plane-only")
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
	l, err := landscape.New(landscape.Config{
		StateDir:     o.stateDir,
		BinDir:       o.binDir,
		Out:          out,
		StartTimeout: o.startTimeout,
		Detached:     o.detached,
		Images:       images,
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
	err = l.Run(ctx)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	return err
}

// startDetached starts `landscape up --foreground` in a new session with
// its output in logs/landscape.log, shows that output until the landscape
// is ready (or failed), and returns. Ctrl-C meanwhile stops it.
func startDetached(ctx context.Context, out io.Writer, o *landscapeOptions) error {
	// Bad flags fail here, before anything is created or started, not in
	// the background process; the child gets them with absolute paths.
	images, err := landscape.UserImages(o.imageMaps, o.imageMapFiles)
	if err != nil {
		return err
	}
	manifests, err := absPaths(o.manifests)
	if err != nil {
		return err
	}
	if err := stack.CheckManifests(manifests); err != nil {
		return err
	}
	layout, err := landscape.PrepareStateDir(o.stateDir)
	if err != nil {
		return err
	}
	if st, err := landscape.ReadStatus(layout.Dir); err == nil && st.Running {
		return fmt.Errorf("%w: %s (pid %d); 'marketplane landscape status' shows it, 'marketplane landscape down' stops it",
			landscape.ErrRunning, layout.Dir, st.State.Supervisor.PID)
	}
	binDir, err := controlplane.BinDir(o.binDir)
	if err != nil {
		return err
	}
	if _, err := controlplane.FindBinaries(binDir); err != nil {
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
	args := []string{"landscape", "up", "--foreground", "--detached",
		"--state-dir=" + layout.Dir, "--bin-dir=" + binDir, "--start-timeout=" + o.startTimeout.String()}
	if o.controlPlaneOnly {
		args = append(args, "--control-plane-only")
	}
	for _, m := range images {
		args = append(args, "--image-map="+m.Image+"="+m.Binary)
	}
	for _, m := range manifests {
		args = append(args, "--manifest="+m)
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

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	tail := &logTail{path: logPath, offset: offset, out: out}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	interrupted := false
	for {
		select {
		case err := <-exited:
			tail.flush()
			if interrupted {
				return errors.New("interrupted; the landscape was stopped")
			}
			return fmt.Errorf("the landscape did not start (%w); its output is in %s", err, logPath)
		case <-sigs:
			if !interrupted {
				interrupted = true
				fmt.Fprintln(out, "Interrupted: stopping the landscape...")
				_ = child.Process.Signal(syscall.SIGTERM)
			}
		case <-ctx.Done():
			_ = child.Process.Signal(syscall.SIGTERM)
			if err := <-exited; err != nil {
				return fmt.Errorf("%w (the landscape then exited: %w)", ctx.Err(), err)
			}
			return ctx.Err()
		case <-tick.C:
			tail.flush()
			if interrupted {
				continue
			}
			if st, err := landscape.ReadStatus(layout.Dir); err == nil && st.State.Phase == controlplane.PhaseReady &&
				st.State.Supervisor != nil && st.State.Supervisor.PID == child.Process.Pid {
				tail.flush()
				return nil
			}
		}
	}
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
			return landscape.Down(cmd.Context(), o.stateDir, cmd.OutOrStdout())
		},
	}
}

func newLandscapeStatusCommand(o *landscapeOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the landscape's clusters, processes and kubeconfigs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := landscape.ReadStatus(o.stateDir)
			if errors.Is(err, controlplane.ErrNoState) {
				fmt.Fprintf(cmd.OutOrStdout(), "No landscape in %s; 'marketplane landscape up' starts one.\n", o.stateDir)
				return nil
			}
			if err != nil {
				return err
			}
			st.Print(cmd.Context(), cmd.OutOrStdout(), true)
			return nil
		},
	}
}
