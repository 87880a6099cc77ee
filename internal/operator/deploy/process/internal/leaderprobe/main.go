// Command leaderprobe stands in for an unmodified openMCP provider in the
// process deployer's tests: like the kubebuilder layout of openMCP's
// service-provider template it parses its flags with the flag package (an
// unknown flag makes it exit), listens for health probes on :8081 unless
// told otherwise, and runs a controller-runtime manager whose leader
// election finds its namespace the default way, without
// LeaderElectionNamespace: from the service-account namespace file.
//
// init exits at once. run writes $PROBE_OUT/<POD_NAME>.<pid>.json (its
// arguments, pid and the namespace file) and, once elected,
// $PROBE_OUT/leader.<POD_NAME>.<pid>; it stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// namespaceFile is where controller-runtime looks for the namespace of
// leader election when none is configured.
const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// report is what run writes first; the tests decode it with their own copy
// of the contract probe's report, of which this is a part.
type report struct {
	Subcommand    string   `json:"subcommand"`
	Args          []string `json:"args"`
	PID           int      `json:"pid"`
	NamespaceFile string   `json:"namespaceFile"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: leaderprobe init|run [flags]")
		os.Exit(64)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ContinueOnError)
	fs.String("environment", "", "contract: the environment")
	fs.String("provider-name", "", "contract: the provider's name")
	fs.String("verbosity", "INFO", "contract: the log level")
	leaderElect := fs.Bool("leader-elect", false, "elect a leader")
	metricsAddr := fs.String("metrics-bind-address", "0", "metrics address (0: off)")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "health probe address")
	pprofAddr := fs.String("pprof-bind-address", "", "pprof address (empty: off)")
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	switch os.Args[1] {
	case "init":
		fmt.Println("leaderprobe: init done")
	case "run":
		if err := run(*leaderElect, *metricsAddr, *probeAddr, *pprofAddr); err != nil {
			fmt.Fprintln(os.Stderr, "leaderprobe:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "leaderprobe: unknown subcommand %q\n", os.Args[1])
		os.Exit(64)
	}
}

func run(leaderElect bool, metricsAddr, probeAddr, pprofAddr string) error {
	ctrl.SetLogger(zap.New())
	r := report{Subcommand: "run", Args: os.Args[1:], PID: os.Getpid()}
	if ns, err := os.ReadFile(namespaceFile); err != nil {
		r.NamespaceFile = "error: " + err.Error()
	} else {
		r.NamespaceFile = string(ns)
	}
	if err := write(fmt.Sprintf("%s.%d.json", os.Getenv("POD_NAME"), r.PID), r); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// Short leases, so that a test sees a new leader soon after the old
	// one was killed.
	lease, renew, retry := 8*time.Second, 5*time.Second, time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:         leaderElect,
		LeaderElectionID:       "leaderprobe",
		LeaseDuration:          &lease,
		RenewDeadline:          &renew,
		RetryPeriod:            &retry,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		PprofBindAddress:       pprofAddr,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// A runnable that needs leader election: it starts on the leader only.
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if err := write(fmt.Sprintf("leader.%s.%d", os.Getenv("POD_NAME"), os.Getpid()), r); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}))
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// write puts v into $PROBE_OUT/name atomically.
func write(name string, v any) error {
	dir := os.Getenv("PROBE_OUT")
	if dir == "" {
		return fmt.Errorf("PROBE_OUT is not set")
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+name)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}
