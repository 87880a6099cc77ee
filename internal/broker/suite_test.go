package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marketplane/marketplane/pkg/manifests"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/marketplane/marketplane/internal/broker/app"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The integration tests share two real API servers (platform with the test
// catalog, onboarding with the test provisioner) and one broker, started on
// first use, so that the fuzz and unit tests of this package start none.
var env struct {
	once   sync.Once
	err    error
	ctx    context.Context
	cancel context.CancelFunc

	platform, onboarding *testenv.Cluster
	kubeconfigs          map[string]string
	broker               *brokerProcess
}

const (
	testUser     = "platform"
	testPassword = "s3cr3t-password"
	// testSyncTimeout bounds the synchronous waits of the test brokers.
	testSyncTimeout = 3 * time.Second
	// testTombstoneTTL is how long tombstones answer "succeeded".
	testTombstoneTTL = 4 * time.Second
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env.cancel != nil {
		env.cancel()
	}
	if env.broker != nil {
		if err := env.broker.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop the shared broker: %v\n", err)
		}
	}
	for _, c := range []*testenv.Cluster{env.platform, env.onboarding} {
		if c != nil {
			_ = c.Stop()
		}
	}
	os.Exit(code)
}

// setup starts the shared environment once and returns the shared broker.
func setup(t *testing.T) *brokerProcess {
	t.Helper()
	testenv.SkipIfShort(t)
	env.once.Do(func() { env.err = start() })
	if env.err != nil {
		t.Fatalf("test environment: %v", env.err)
	}
	return env.broker
}

func start() error {
	env.ctx, env.cancel = context.WithCancel(context.Background())
	ctrl.SetLogger(logr.Discard())
	clusters, err := testenv.NewMany(map[string][]testenv.Option{"platform": nil, "onboarding": nil})
	if err != nil {
		return err
	}
	env.platform, env.onboarding = clusters["platform"], clusters["onboarding"]
	env.kubeconfigs = map[string]string{}
	for name, c := range map[string]*testenv.Cluster{"platform": env.platform, "onboarding": env.onboarding} {
		p, err := c.KubeconfigPath()
		if err != nil {
			return err
		}
		env.kubeconfigs[name] = p
	}
	if err := installCatalog(env.ctx); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(env.onboarding.Config, ctrl.Options{
		Scheme:  env.onboarding.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return err
	}
	if err := startProvisioner(mgr); err != nil {
		return err
	}
	go func() { _ = mgr.Start(env.ctx) }()
	env.broker, err = startBrokerProcess(env.kubeconfigs["onboarding"])
	return err
}

// sampleCatalog is the sample catalog of the inter-operator (issue #5).
const sampleCatalog = "../../examples/catalog"

// installCatalog creates the test catalog and the SFService and SFPlans of
// the sample catalog on the platform cluster.
func installCatalog(ctx context.Context) error {
	c := env.platform.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "interoperator"}}); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(sampleCatalog, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range append([]string{filepath.Join("testdata", "catalog.yaml")}, files...) {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		objs, err := manifests.Decode(data)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			if o.GetKind() != "SFService" && o.GetKind() != "SFPlan" {
				continue
			}
			if err := c.Create(ctx, o); err != nil {
				return fmt.Errorf("create %s %s from %s: %w", o.GetKind(), o.GetName(), f, err)
			}
		}
	}
	return nil
}

// brokerProcess is one broker (app.Run) serving on loopback.
type brokerProcess struct {
	url, metricsURL string
	cancel          context.CancelFunc
	done            chan error
}

// startBrokerProcess runs a broker whose onboarding kubeconfig is the given
// file (the onboarding cluster's, or a proxy's in front of it).
func startBrokerProcess(onboardingKubeconfig string, mods ...func(*app.Options)) (*brokerProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	o := app.DefaultOptions()
	o.Kubeconfig = env.kubeconfigs["platform"]
	o.OnboardingKubeconfig = onboardingKubeconfig
	o.Username, o.Password = testUser, testPassword
	o.Listener, o.MetricsListener = ln, mln
	o.SyncTimeout, o.TombstoneTTL = testSyncTimeout, testTombstoneTTL
	o.ShutdownTimeout = 5 * time.Second
	o.CacheSyncTimeout = 30 * time.Second
	o.Verbosity = "ERROR"
	for _, m := range mods {
		m(&o)
	}
	ready := make(chan struct{})
	o.Ready = func() { close(ready) }
	ctx, cancel := context.WithCancel(env.ctx)
	b := &brokerProcess{
		url:        "http://" + ln.Addr().String(),
		metricsURL: "http://" + mln.Addr().String(),
		cancel:     cancel,
		done:       make(chan error, 1),
	}
	go func() { b.done <- app.Run(ctx, o) }()
	select {
	case <-ready:
		return b, nil
	case err := <-b.done:
		cancel()
		return nil, fmt.Errorf("broker did not start: %w", err)
	case <-time.After(60 * time.Second):
		cancel()
		return nil, fmt.Errorf("broker did not start within a minute")
	}
}

// stop shuts the broker down and returns what Run returned.
func (b *brokerProcess) stop() error {
	b.cancel()
	select {
	case err := <-b.done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("broker did not stop within 30s")
	}
}

// reply is an OSB response.
type reply struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// String describes the reply for messages, with the credentials of a bind
// reply left out: test output is a log, and logs never hold secrets.
func (r reply) String() string {
	if creds, ok := r.body["credentials"].(map[string]any); ok {
		redacted := maps.Clone(r.body)
		redacted["credentials"] = fmt.Sprintf("redacted (%d keys)", len(creds))
		if raw, err := json.Marshal(redacted); err == nil {
			return fmt.Sprintf("%d %s", r.status, raw)
		}
		return fmt.Sprintf("%d <a bind reply with credentials>", r.status)
	}
	return fmt.Sprintf("%d %s", r.status, r.raw)
}

// str returns a top-level string field of the body.
func (r reply) str(field string) string {
	s, _ := r.body[field].(string)
	return s
}

// call is one OSB request.
type call struct {
	method, path, query string
	body                any
	// header adds or (with an empty value) removes headers.
	header map[string]string
	noAuth bool
	auth   [2]string
}

var httpClient = &http.Client{Timeout: 60 * time.Second}

// do sends c to the broker at base with the platform's credentials and
// version header unless c says otherwise.
func do(t *testing.T, base string, c call) reply {
	t.Helper()
	r, err := send(base, c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// send is do for goroutines other than the test's: it returns what do
// would fail the test with.
func send(base string, c call) (reply, error) {
	var body io.Reader
	switch b := c.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return reply{}, fmt.Errorf("encode the request body: %w", err)
		}
		body = bytes.NewReader(data)
	}
	u := base + c.path
	if c.query != "" {
		u += "?" + c.query
	}
	req, err := http.NewRequest(c.method, u, body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", c.method, u, err)
	}
	switch {
	case c.noAuth:
	case c.auth != [2]string{}:
		req.SetBasicAuth(c.auth[0], c.auth[1])
	default:
		req.SetBasicAuth(testUser, testPassword)
	}
	req.Header.Set("X-Broker-API-Version", "2.17")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", c.method, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: read the answer: %w", c.method, u, err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			return r, fmt.Errorf("%s %s: %d with a body that is not a JSON object: %q", c.method, u, resp.StatusCode, raw)
		}
	}
	return r, nil
}

// poll repeats c until cond holds for the reply, or fails the test.
func poll(t *testing.T, base string, c call, timeout time.Duration, what string, cond func(reply) bool) reply {
	t.Helper()
	var last reply
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = do(t, base, c)
		return cond(last), nil
	})
	if err != nil {
		t.Fatalf("%s: not reached within %s; last reply %s", what, timeout, last)
	}
	return last
}

// writeKubeconfig writes a kubeconfig for the onboarding cluster's
// credentials at another server address (a proxy).
func writeKubeconfig(dir, server string) (string, error) {
	cfg := env.onboarding.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	p := filepath.Join(dir, "proxied-kubeconfig")
	return p, clientcmd.WriteToFile(*kc, p)
}
