package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/marketplane/marketplane/internal/landscape/pki"
	"github.com/marketplane/marketplane/pkg/startslot"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// Controllers are the kube-controller-manager controllers every cluster
// runs: enough for namespaces, owner references, service accounts and their
// tokens and aggregated roles to behave as in a real cluster. Controllers
// of workloads are left out: only a cluster that runs workloads on
// simulated nodes (WithWorkloads) adds WorkloadControllers.
var Controllers = []string{
	"namespace", "garbagecollector", "serviceaccount", "serviceaccount-token",
	"clusterrole-aggregation", "root-ca-cert-publisher",
}

// Defaults of the options.
const (
	// DefaultStartTimeout bounds the start of etcd and of each cluster.
	DefaultStartTimeout = 3 * time.Minute
	// clientQPS and clientBurst are the client-side limits of the REST
	// configs handed out: the landscape and its steps write in bursts.
	clientQPS, clientBurst = 100, 200
	// etcdPrefixRoot starts every cluster's etcd prefix.
	etcdPrefixRoot = "/marketplane/"
	// adminUser is the user name of the admin client certificates.
	adminUser = "marketplane-admin"
	// mastersGroup is the group that RBAC grants everything.
	mastersGroup = "system:masters"
	// controllerManagerUser is kube-controller-manager's user, bound to
	// its bootstrap role.
	controllerManagerUser = "system:kube-controller-manager"
	// rootCAConfigMap is what root-ca-cert-publisher writes into every
	// namespace; its presence shows that kube-controller-manager works.
	rootCAConfigMap = "kube-root-ca.crt"
	// pollInterval is how often the start waits poll.
	pollInterval = 200 * time.Millisecond
)

// Option configures a ControlPlane.
type Option func(*ControlPlane)

// WithStartTimeout bounds the start of etcd and of each cluster
// (DefaultStartTimeout).
func WithStartTimeout(d time.Duration) Option { return func(c *ControlPlane) { c.startTimeout = d } }

// WithStopTimeout sets the wait between SIGTERM and SIGKILL
// (DefaultStopTimeout).
func WithStopTimeout(d time.Duration) Option { return func(c *ControlPlane) { c.stopTimeout = d } }

// WithProcessEvents sets a function told of every exit of a process of the
// control plane (or of one started with its Runner) and of its restart, to
// report them (see WithRestarts).
func WithProcessEvents(fn func(ProcessEvent)) Option { return func(c *ControlPlane) { c.events = fn } }

// WithRestartBackoff replaces supervisor.DefaultBackoff, the wait before
// restarting a process that exited; for tests.
func WithRestartBackoff(fn func(n int) time.Duration) Option {
	return func(c *ControlPlane) { c.backoff = fn }
}

// WithEnv sets the processes' environment (default DefaultEnv()).
func WithEnv(env []string) Option { return func(c *ControlPlane) { c.env = env } }

// DefaultEnv is the environment of the control plane's processes: PATH,
// HOME and TMPDIR of the caller and nothing else, so that variables such
// as KUBECONFIG cannot change what they do.
func DefaultEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// ControlPlane runs the etcd and the clusters of one landscape and records
// them in its Store.
type ControlPlane struct {
	// Layout is the state directory.
	Layout Layout
	// Binaries are the executables it runs.
	Binaries Binaries
	// Store records what runs.
	Store *Store

	startTimeout, stopTimeout time.Duration
	env                       []string
	runner                    *Runner
	events                    func(ProcessEvent)
	backoff                   func(int) time.Duration

	servingCA  *pki.Authority
	etcdCA     *pki.Authority
	etcdServer *pki.Pair
	etcdClient *pki.Pair

	// workloads are the clusters that run workloads (WithWorkloads).
	workloads map[string]bool

	mu       sync.Mutex
	etcd     *Proc
	etcdKV   *clientv3.Client
	clusters map[string]*RunningCluster
}

// RunningCluster is a cluster whose API server answers.
type RunningCluster struct {
	// Name is the cluster's name.
	Name string
	// KubeconfigPath and Kubeconfig are its admin kubeconfig (client
	// certificate of a system:masters user, embedded).
	KubeconfigPath string
	Kubeconfig     []byte
	// Config is an admin REST config.
	Config *rest.Config
	// Host is the API server's URL.
	Host string

	apiServer, controllerManager *Proc
	// scheduler and kwok run when the cluster runs workloads.
	scheduler, kwok *Proc
}

// New returns a ControlPlane for the state directory of layout. It starts
// nothing; Close releases it.
func New(layout Layout, bins Binaries, store *Store, opts ...Option) *ControlPlane {
	c := &ControlPlane{
		Layout:       layout,
		Binaries:     bins,
		Store:        store,
		startTimeout: DefaultStartTimeout,
		stopTimeout:  DefaultStopTimeout,
		env:          DefaultEnv(),
		clusters:     map[string]*RunningCluster{},
	}
	for _, opt := range opts {
		opt(c)
	}
	// Every process is kept running: a landscape whose etcd or API server
	// crashed heals by itself (the clients of the others reconnect).
	c.runner = NewRunner(c.env, WithRestarts(store, c.events), WithBackoff(c.backoff))
	return c
}

// EnsurePKI creates the landscape-wide CAs and etcd's certificates, or
// loads them when they exist.
func (c *ControlPlane) EnsurePKI() error {
	dir := c.Layout.PKIDir()
	var err error
	if c.servingCA, err = pki.LoadOrCreateCA(dir, "ca", "marketplane-landscape-ca"); err != nil {
		return err
	}
	if c.etcdCA, err = pki.LoadOrCreateCA(dir, "etcd-ca", "marketplane-landscape-etcd-ca"); err != nil {
		return err
	}
	// etcd's gRPC gateway connects to etcd itself with the serving
	// certificate, so that one is a client certificate too.
	etcdServer := pki.LoopbackServer("etcd")
	etcdServer.Client = true
	if c.etcdServer, err = c.etcdCA.Issue(dir, "etcd-server", etcdServer); err != nil {
		return err
	}
	c.etcdClient, err = c.etcdCA.Issue(dir, "etcd-client", pki.Leaf{CommonName: "kube-apiserver", Client: true})
	return err
}

// CABundle is the PEM CA bundle every API server's serving certificate
// chains to.
func (c *ControlPlane) CABundle() []byte { return c.servingCA.CertPEM }

// EtcdPrefix returns the etcd prefix of a cluster.
func EtcdPrefix(cluster string) string { return etcdPrefixRoot + cluster }

// StartEtcd starts etcd on the ports and data directory recorded in the
// store and waits until it answers.
func (c *ControlPlane) StartEtcd(ctx context.Context) error {
	rec := c.Store.Snapshot().Etcd
	client := "https://127.0.0.1:" + strconv.Itoa(rec.ClientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(rec.PeerPort)
	args := []string{
		"--name=landscape",
		"--data-dir=" + rec.DataDir,
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=landscape=" + peer,
		"--initial-cluster-state=new",
		"--cert-file=" + c.etcdServer.CertFile,
		"--key-file=" + c.etcdServer.KeyFile,
		"--trusted-ca-file=" + c.etcdCA.CertFile,
		"--client-cert-auth",
		// A landscape is for development: losing the last writes on a
		// power cut is worth the much faster writes. A killed process
		// loses nothing (the page cache survives it).
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	p, err := c.runner.Start("etcd", c.Binaries.Etcd, args, c.Layout.Log("etcd"))
	if err != nil {
		return err
	}
	etcdRec := p.Record // a copy: the Runner updates the stored one on restarts
	if err := c.Store.Update(func(s *State) error { s.Etcd.Process = &etcdRec; return nil }); err != nil {
		p.Stop(c.stopTimeout)
		return err
	}
	c.mu.Lock()
	c.etcd = p
	c.mu.Unlock()

	kv, err := c.newEtcdClient(client)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.etcdKV = kv
	c.mu.Unlock()
	err = c.poll(ctx, "etcd", []*Proc{p}, func(ctx context.Context) (bool, error) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := kv.Status(sctx, client)
		return err == nil, nil
	})
	return err
}

func (c *ControlPlane) newEtcdClient(endpoint string) (*clientv3.Client, error) {
	cert, err := tls.X509KeyPair(c.etcdClient.CertPEM, c.etcdClient.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.etcdCA.CertPEM)
	kv, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		TLS:         &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return kv, nil
}

// DeleteData deletes every etcd key of a cluster.
func (c *ControlPlane) DeleteData(ctx context.Context, cluster string) error {
	kv, err := c.kv()
	if err != nil {
		return err
	}
	if _, err := kv.Delete(ctx, EtcdPrefix(cluster)+"/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("delete etcd data of cluster %s: %w", cluster, err)
	}
	return nil
}

// CountKeys returns how many etcd keys a cluster has.
func (c *ControlPlane) CountKeys(ctx context.Context, cluster string) (int64, error) {
	kv, err := c.kv()
	if err != nil {
		return 0, err
	}
	resp, err := kv.Get(ctx, EtcdPrefix(cluster)+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("count etcd keys of cluster %s: %w", cluster, err)
	}
	return resp.Count, nil
}

func (c *ControlPlane) kv() (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.etcdKV == nil {
		return nil, errors.New("etcd is not running")
	}
	return c.etcdKV, nil
}

// StartCluster starts the API server and controller manager of the
// cluster recorded in the store under name (its port and etcd prefix must
// be recorded), waits until both work, and writes the admin kubeconfig.
// When it fails, it stops what it started.
func (c *ControlPlane) StartCluster(ctx context.Context, name string) (_ *RunningCluster, err error) {
	state := c.Store.Snapshot()
	rec, ok := state.Clusters[name]
	if !ok {
		return nil, fmt.Errorf("cluster %s is not recorded", name)
	}
	c.mu.Lock()
	if _, running := c.clusters[name]; running {
		c.mu.Unlock()
		return nil, fmt.Errorf("cluster %s is already running", name)
	}
	c.mu.Unlock()
	id, err := c.clusterIdentity(name, rec.Port, rec.ServiceAccountIssuer)
	if err != nil {
		return nil, err
	}
	if rec.ServiceAccountIssuer == "" {
		// Recorded before the first start, so that a later move of the
		// port keeps the issuer of every token handed out.
		if err := c.Store.Update(func(s *State) error { s.Clusters[name].ServiceAccountIssuer = id.serviceAccountIssuer; return nil }); err != nil {
			return nil, err
		}
	}
	rc := &RunningCluster{Name: name, KubeconfigPath: c.Layout.Kubeconfig(name), Host: id.host}
	defer func() {
		if err != nil {
			c.stopProcs(rc)
			_ = c.Store.Update(func(s *State) error {
				if r := s.Clusters[name]; r != nil {
					r.APIServer, r.ControllerManager, r.Scheduler, r.Kwok = nil, nil, nil, nil
				}
				return nil
			})
		}
	}()

	if err := c.writeAdminKubeconfig(rc, id); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, rc, rec, id, state.Etcd.ClientPort); err != nil {
		return nil, err
	}
	if err := c.startControllerManager(ctx, rc, id); err != nil {
		return nil, err
	}
	if c.workloads[name] {
		if err := c.startWorkloads(ctx, rc, id); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.clusters[name] = rc
	c.mu.Unlock()
	return rc, nil
}

// writeAdminKubeconfig writes the admin kubeconfig of rc and sets its
// client config.
func (c *ControlPlane) writeAdminKubeconfig(rc *RunningCluster, id *identity) error {
	var err error
	if rc.Kubeconfig, err = kubeconfig(rc.Name, id.host, c.servingCA.CertPEM, id.admin); err != nil {
		return err
	}
	if err := pki.WriteFileAtomic(rc.KubeconfigPath, rc.Kubeconfig, 0o600); err != nil {
		return err
	}
	if rc.Config, err = clientcmd.RESTConfigFromKubeConfig(rc.Kubeconfig); err != nil {
		return fmt.Errorf("admin config of cluster %s: %w", rc.Name, err)
	}
	rc.Config.QPS, rc.Config.Burst = clientQPS, clientBurst
	return nil
}

// startAPIServer starts the kube-apiserver of rc (recorded as rec, its
// etcd on etcdPort), records it and waits until it is ready.
func (c *ControlPlane) startAPIServer(ctx context.Context, rc *RunningCluster, rec *Cluster, id *identity, etcdPort int) error {
	name := rc.Name
	apiServerArgs, apiServerEnv := c.apiServerArgs(rec, id, etcdPort), []string(nil)
	if rec.Small() {
		apiServerArgs, apiServerEnv = append(apiServerArgs, smallAPIServerArgs()...), SmallAPIServerEnv
	}
	// The start timeout counts from the slot on: on a machine starting many
	// API servers, this one waits its turn rather than starve with all.
	releaseSlot, err := startslot.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("start cluster %s: %w", name, err)
	}
	defer releaseSlot()
	if rc.apiServer, err = c.runner.StartWithEnv("kube-apiserver-"+name, c.Binaries.APIServer, apiServerArgs, apiServerEnv, c.Layout.Log("kube-apiserver-"+name)); err != nil {
		return err
	}
	apiServerRec := rc.apiServer.Record // a copy, see StartEtcd
	if err := c.Store.Update(func(s *State) error { s.Clusters[name].APIServer = &apiServerRec; return nil }); err != nil {
		return err
	}
	return c.waitReadyz(ctx, rc)
}

// startControllerManager starts the kube-controller-manager of rc,
// records it and waits until it works.
func (c *ControlPlane) startControllerManager(ctx context.Context, rc *RunningCluster, id *identity) error {
	name := rc.Name
	kcmKubeconfig, err := kubeconfig(name, id.host, c.servingCA.CertPEM, id.controllerManager)
	if err != nil {
		return err
	}
	kcmKubeconfigPath := c.Layout.Path("pki", name, "controller-manager.kubeconfig")
	if err := pki.WriteFileAtomic(kcmKubeconfigPath, kcmKubeconfig, 0o600); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kcmKubeconfigPath,
		"--controllers=" + strings.Join(c.controllers(name), ","),
		"--leader-elect=false",
		// No serving: nothing scrapes it, and it would need a port.
		"--secure-port=0",
		// Each controller acts as its own service account with its
		// bootstrap role, as in a real cluster.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + id.saPrivate,
		"--root-ca-file=" + c.servingCA.CertFile,
	}
	if rc.controllerManager, err = c.runner.Start("kube-controller-manager-"+name, c.Binaries.ControllerManager, args, c.Layout.Log("kube-controller-manager-"+name)); err != nil {
		return err
	}
	kcmRec := rc.controllerManager.Record // a copy, see StartEtcd
	if err := c.Store.Update(func(s *State) error { s.Clusters[name].ControllerManager = &kcmRec; return nil }); err != nil {
		return err
	}
	return c.waitControllerManager(ctx, rc)
}

// identity is what a cluster's processes and clients authenticate with.
type identity struct {
	host                 string
	serving              *pki.Pair
	clientCA             *pki.Authority
	admin                *pki.Pair
	controllerManager    *pki.Pair
	saPrivate, saPublic  string
	serviceAccountIssuer string
}

// clusterIdentity creates or loads a cluster's certificates and keys. Each
// cluster has its own client CA and service-account key, so that neither
// an admin certificate nor a token of one cluster is accepted by another.
// issuer is the recorded service-account issuer; empty means the URL of
// port. The serving certificate names the loopback address, not a port,
// so it stays valid when the port moves.
func (c *ControlPlane) clusterIdentity(name string, port int, issuer string) (*identity, error) {
	dir := c.Layout.ClusterPKIDir(name)
	id := &identity{host: apiServerURL(port), serviceAccountIssuer: issuer}
	if id.serviceAccountIssuer == "" {
		id.serviceAccountIssuer = id.host
	}
	var err error
	if id.serving, err = c.servingCA.Issue(dir, "apiserver", pki.LoopbackServer("kube-apiserver-"+name)); err != nil {
		return nil, err
	}
	if id.clientCA, err = pki.LoadOrCreateCA(dir, "client-ca", name+"-client-ca"); err != nil {
		return nil, err
	}
	if id.admin, err = id.clientCA.Issue(dir, "admin", pki.Leaf{CommonName: adminUser, Organizations: []string{mastersGroup}, Client: true}); err != nil {
		return nil, err
	}
	if id.controllerManager, err = id.clientCA.Issue(dir, "controller-manager", pki.Leaf{CommonName: controllerManagerUser, Client: true}); err != nil {
		return nil, err
	}
	if id.saPrivate, id.saPublic, err = pki.LoadOrCreateSigningKey(dir, "service-account"); err != nil {
		return nil, err
	}
	return id, nil
}

func (c *ControlPlane) apiServerArgs(rec *Cluster, id *identity, etcdPort int) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(rec.Port),
		"--tls-cert-file=" + id.serving.CertFile,
		"--tls-private-key-file=" + id.serving.KeyFile,
		"--client-ca-file=" + id.clientCA.CertFile,
		"--etcd-servers=https://127.0.0.1:" + strconv.Itoa(etcdPort),
		"--etcd-prefix=" + rec.EtcdPrefix,
		"--etcd-cafile=" + c.etcdCA.CertFile,
		"--etcd-certfile=" + c.etcdClient.CertFile,
		"--etcd-keyfile=" + c.etcdClient.KeyFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + id.serviceAccountIssuer,
		"--service-account-key-file=" + id.saPublic,
		"--service-account-signing-key-file=" + id.saPrivate,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--profiling=false",
		// The endpoints of the default/kubernetes Service cannot be a
		// loopback address; nothing in a landscape needs them.
		"--endpoint-reconciler-type=none",
	}
}

// kubeconfig returns a kubeconfig for host with the client certificate of
// pair embedded.
func kubeconfig(name, host string, ca []byte, pair *pki.Pair) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: pair.CertPEM, ClientKeyData: pair.KeyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig of %s: %w", name, err)
	}
	return data, nil
}

// readyzTimeout bounds one /readyz request of a start. A starting API
// server on a loaded machine answers it slowly (its etcd checks wait for an
// etcd that is slow too): 5 s was seen to cut every answer of a restarted
// kube-apiserver for minutes. kubeadm gives its probes of kube-apiserver
// 15 s as well.
const readyzTimeout = 15 * time.Second

// waitReadyz waits until the API server's /readyz is ok. When it gives up,
// the error names the checks the last answer said were failing, or why
// the last request got none.
func (c *ControlPlane) waitReadyz(ctx context.Context, rc *RunningCluster) error {
	httpClient, err := rest.HTTPClientFor(rc.Config)
	if err != nil {
		return fmt.Errorf("HTTP client for %s: %w", rc.Name, err)
	}
	httpClient.Timeout = readyzTimeout
	var last error
	err = c.poll(ctx, "kube-apiserver of "+rc.Name, []*Proc{rc.apiServer}, func(ctx context.Context) (bool, error) {
		err := Readyz(ctx, httpClient, rc.Host)
		if ctx.Err() == nil {
			// Not a request the end of the wait cut short.
			last = err
		}
		return err == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w\nlast answer of /readyz: %w", err, last)
	}
	return err
}

// Readyz returns nil when the API server at host reports ready, else an
// error naming the checks that fail.
func Readyz(ctx context.Context, c *http.Client, host string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz?verbose", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var failing []string
		for line := range strings.Lines(string(body)) {
			if strings.HasPrefix(line, "[-]") {
				failing = append(failing, strings.TrimSpace(line))
			}
		}
		if len(failing) == 0 {
			return fmt.Errorf("%s/readyz: %s", host, resp.Status)
		}
		return fmt.Errorf("%s/readyz: %s: %s", host, resp.Status, strings.Join(failing, "; "))
	}
	return nil
}

// waitControllerManager waits until kube-controller-manager has published
// the root CA into the default namespace, which shows that it reaches the
// API server and that its controllers run.
func (c *ControlPlane) waitControllerManager(ctx context.Context, rc *RunningCluster) error {
	cs, err := kubernetes.NewForConfig(rc.Config)
	if err != nil {
		return fmt.Errorf("client for %s: %w", rc.Name, err)
	}
	return c.poll(ctx, "kube-controller-manager of "+rc.Name, []*Proc{rc.apiServer, rc.controllerManager}, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(corev1.NamespaceDefault).Get(ctx, rootCAConfigMap, metav1.GetOptions{})
		return err == nil, nil
	})
}

// Poll waits for a process a step of the landscape started with the
// Runner, as the control plane waits for its own: see poll.
func (c *ControlPlane) Poll(ctx context.Context, what string, p *Proc, cond wait.ConditionWithContextFunc) error {
	return c.poll(ctx, what, []*Proc{p}, cond)
}

// poll runs cond until it is true, one of procs fails (it exits and is not
// restarted, or exits after maxStartRestarts restarts: an error with the
// end of its log) or the start timeout passes.
func (c *ControlPlane) poll(ctx context.Context, what string, procs []*Proc, cond wait.ConditionWithContextFunc) error {
	tctx, cancel := context.WithTimeout(ctx, c.startTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(tctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		for _, p := range procs {
			if p.startFailed() {
				return false, p.ExitError()
			}
		}
		return cond(ctx)
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		last := procs[len(procs)-1].Record
		return fmt.Errorf("waiting for %s: %w; last lines of %s:\n%s", what, ctx.Err(), last.Log, supervisor.LogTail(last.Log, 15))
	}
	for _, p := range procs {
		if p.startFailed() {
			return p.ExitError()
		}
	}
	if tctx.Err() != nil {
		last := procs[len(procs)-1].Record
		return fmt.Errorf("%s not ready within %s; last lines of %s:\n%s", what, c.startTimeout, last.Log, supervisor.LogTail(last.Log, 15))
	}
	return err
}

// Cluster returns a running cluster, or nil.
func (c *ControlPlane) Cluster(name string) *RunningCluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clusters[name]
}

// StopCluster stops a cluster's controller manager and API server and
// clears their records. Its data stays.
func (c *ControlPlane) StopCluster(name string) error {
	c.mu.Lock()
	rc := c.clusters[name]
	delete(c.clusters, name)
	c.mu.Unlock()
	if rc != nil {
		c.stopProcs(rc)
	}
	return c.Store.Update(func(s *State) error {
		if r := s.Clusters[name]; r != nil {
			r.APIServer, r.ControllerManager, r.Scheduler, r.Kwok = nil, nil, nil, nil
		}
		return nil
	})
}

func (c *ControlPlane) stopProcs(rc *RunningCluster) {
	for _, p := range []*Proc{rc.kwok, rc.scheduler, rc.controllerManager, rc.apiServer} {
		if p != nil {
			p.Stop(c.stopTimeout)
		}
	}
}

// Stop stops every running cluster (those provisioned for requests first)
// and then etcd, and clears their records. Data stays.
func (c *ControlPlane) Stop() error {
	state := c.Store.Snapshot()
	var errs []error
	for _, provisioned := range []bool{true, false} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for name, rec := range state.Clusters {
			if (rec.Request != nil) != provisioned {
				continue
			}
			wg.Go(func() {
				if err := c.StopCluster(name); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	c.mu.Lock()
	etcd, kv := c.etcd, c.etcdKV
	c.etcd, c.etcdKV = nil, nil
	c.mu.Unlock()
	if kv != nil {
		_ = kv.Close()
	}
	if etcd != nil {
		etcd.Stop(c.stopTimeout)
	}
	errs = append(errs, c.Store.Update(func(s *State) error { s.Etcd.Process = nil; return nil }))
	return errors.Join(errs...)
}

// Close stops the Runner: processes still running are killed.
func (c *ControlPlane) Close() { c.runner.Close() }

// Procs returns the records of every process this ControlPlane runs.
func (c *ControlPlane) Procs() []Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Process
	if c.etcd != nil {
		out = append(out, c.etcd.Current())
	}
	for _, rc := range c.clusters {
		for _, p := range []*Proc{rc.apiServer, rc.controllerManager, rc.scheduler, rc.kwok} {
			if p != nil {
				out = append(out, p.Current())
			}
		}
	}
	return out
}

// Runner returns the Runner that starts the control plane's processes; a
// landscape starts its further processes with it too, so that they die with
// the landscape and are restarted when they crash.
func (c *ControlPlane) Runner() *Runner { return c.runner }
