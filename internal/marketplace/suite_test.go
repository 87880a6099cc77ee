package marketplace_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/marketplane/marketplane/internal/marketplace"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The suite shares one API server that plays both the platform and the
// onboarding cluster, with the marketplace controller running against it
// through two cluster objects (the manager's for the platform, a second
// one for the onboarding cluster), as a deployment with two API servers
// would. Every test works on sources of its own names, so they run in
// parallel; each asserts on its own Offerings only.
const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
)

var (
	env *testenv.Cluster
	// k8s is an uncached admin client of the API server.
	k8s client.Client
)

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	if testenv.Short() {
		return m.Run()
	}
	ctrl.SetLogger(testenv.Logger())
	var err error
	env, err = testenv.New(testenv.WithName("marketplace"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	k8s = env.Client

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := marketplace.Init(ctx, k8s, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	onboarding, err := cluster.New(env.Config, func(o *cluster.Options) { o.Scheme = env.Scheme })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := mgr.Add(onboarding); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := marketplace.Setup(mgr, mgr, onboarding); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
