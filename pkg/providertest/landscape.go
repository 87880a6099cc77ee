package providertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/kcpprovider"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/internal/operator/mcp"
	"github.com/marketplane/marketplane/internal/operator/mcpaccess"
	"github.com/marketplane/marketplane/internal/operator/provider"
	"github.com/marketplane/marketplane/pkg/providerrequests"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// Names of what the landscape registers on the platform cluster.
const (
	// ClustersNamespace holds the Cluster objects and their kubeconfig
	// Secrets.
	ClustersNamespace = "marketplane-clusters"
	// OnboardingClusterName is the Cluster of the onboarding cluster.
	OnboardingClusterName = "onboarding"
	// WorkloadClusterName is the Cluster of the workload cluster.
	WorkloadClusterName = "workload"
	// MCPClusterPrefix starts the names of the MCP Clusters: "mcp-0",
	// "mcp-1", ...
	MCPClusterPrefix = "mcp-"
	// Profile is spec.profile of the registered Clusters.
	Profile = "providertest"
	// KCPProfile is the ClusterProfile of the MCP Clusters of a landscape
	// WithKCP, and KCPProviderName the ClusterProvider it names, which
	// serves them with kcp workspaces.
	KCPProfile      = "kcp"
	KCPProviderName = "kcp"
	// KCPClustersNamespace holds the Clusters of KCPProfile and their
	// kubeconfig Secrets, WithKCP: the namespace of the ClusterProvider
	// KCPProviderName, as the operator names it (cp-kcp). The landscape
	// creates it, as the operator does when it deploys the provider.
	KCPClustersNamespace = providerrequests.PrefixClusterProvider + "-" + KCPProviderName
)

// ControllerNamePrefix starts the names of the landscape's controllers (in
// metrics and events), so that they differ from those of the controllers
// under test.
const ControllerNamePrefix = "landscape-"

// DefaultWaitTimeout bounds each wait of the landscape: for its Clusters to
// be Ready, for an MCP to be Ready or gone.
const DefaultWaitTimeout = 90 * time.Second

// Landscape is a running set of clusters with the operator's cluster
// controllers. Its fields are admin (system:masters) access to each API
// server.
type Landscape struct {
	// Platform is the platform cluster: Clusters, ClusterRequests,
	// AccessRequests, provider namespaces.
	Platform *testenv.Cluster
	// Onboarding is the onboarding cluster: ManagedControlPlanes and
	// service objects.
	Onboarding *testenv.Cluster
	// MCPClusters are the clusters ManagedControlPlanes get, registered
	// as "mcp-0", "mcp-1", ... (none WithKCP).
	MCPClusters []*testenv.Cluster
	// Workload is the shared workload cluster, nil without
	// WithWorkloadCluster.
	Workload *testenv.Cluster
	// KCP is the kcp server whose workspaces are the MCP clusters, nil
	// without WithKCP (MCPClusters is then empty).
	KCP *testenv.KCP

	opts     options
	byName   map[string]*testenv.Cluster
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
	// deployer runs the providers' processes, with WithProviderImages.
	deployer *process.Deployer
	// stateDir is the deployer's state directory, removed by Stop.
	stateDir string
}

// Option configures a Landscape.
type Option func(*options)

type options struct {
	mcpClusters int
	workload    bool
	// workloadControllers runs a controller manager on the workload
	// cluster.
	workloadControllers bool
	log                 logr.Logger
	timeout             time.Duration
	images              map[string]string
	kcp                 bool
}

// WithMCPClusters starts n MCP clusters (default 1). MCP clusters are
// Exclusive, so n ManagedControlPlanes can exist at a time.
func WithMCPClusters(n int) Option { return func(o *options) { o.mcpClusters = n } }

// WithWorkloadCluster also starts a shared workload cluster.
func WithWorkloadCluster() Option { return func(o *options) { o.workload = true } }

// WithWorkloadControllers runs a kube-controller-manager on the workload
// cluster (testenv.DefaultControllers: namespaces finish deleting, owned
// objects are garbage-collected), for providers that wait until what they
// deleted there is gone. It implies WithWorkloadCluster. No pods run
// either way: there is no scheduler and there are no nodes.
func WithWorkloadControllers() Option {
	return func(o *options) { o.workload, o.workloadControllers = true, true }
}

// WithProviderImages also runs the operator's provider deployment
// controller with the process deployer: a ServiceProvider, ClusterProvider
// or PlatformService created on the platform cluster is deployed as local
// processes by the init/run contract, exactly as the local landscape does.
// images maps each provider image (repo:tag, repo@digest or repo:*) to the
// binary that stands for it. The processes' logs are in
// Landscape.ProviderLogDir.
func WithProviderImages(images map[string]string) Option {
	return func(o *options) { o.images = images }
}

// WithKCP serves MCPs with kcp workspaces instead of API servers of their
// own: the landscape starts a kcp server (testenv.NewKCP), registers the
// ClusterProfile KCPProfile for the ClusterProvider KCPProviderName and
// runs that provider's controller (internal/kcpprovider) in its manager.
// The profile's Clusters and their kubeconfig Secrets are in
// KCPClustersNamespace, which the landscape creates. The in-process
// provider runs with the landscape's admin rights, not the run role the
// operator gives a deployed one. No "mcp-N" Clusters are registered: an MCP's ClusterRequest gets a new
// Cluster of the profile (the operator's --cluster-profile mcp=kcp), so
// any number of MCPs can exist at a time and WithMCPClusters is ignored. A
// workspace runs no Pods: a provider's domain service belongs on the
// workload cluster.
func WithKCP() Option { return func(o *options) { o.kcp = true } }

// WithLogger sets the logger of the landscape's controllers (default:
// discard).
func WithLogger(l logr.Logger) Option { return func(o *options) { o.log = l } }

// WithWaitTimeout sets how long the landscape waits for Clusters and MCPs
// (default DefaultWaitTimeout).
func WithWaitTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Start starts a landscape for a test and stops it when the test ends. It
// skips the test under -short, as testenv.Start does.
func Start(t testing.TB, opts ...Option) *Landscape {
	t.Helper()
	testenv.SkipIfShort(t)
	l, err := New(opts...)
	if err != nil {
		t.Fatalf("providertest: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Stop(); err != nil {
			t.Errorf("providertest: %v", err)
		}
	})
	return l
}

// New starts a landscape: the API servers (the platform and onboarding
// clusters with a kube-controller-manager, so that namespaces are deleted
// and owner references collected), the registered Clusters and the
// controllers. It returns once every Cluster is Ready. The caller must call
// Stop.
func New(opts ...Option) (*Landscape, error) {
	o := options{mcpClusters: 1, log: logr.Discard(), timeout: DefaultWaitTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.mcpClusters < 1 && !o.kcp {
		return nil, fmt.Errorf("providertest: at least one MCP cluster is needed, got %d", o.mcpClusters)
	}
	l := &Landscape{opts: o, byName: map[string]*testenv.Cluster{}}
	if err := l.startClusters(); err != nil {
		return nil, errors.Join(err, l.Stop())
	}
	if err := l.startControllers(); err != nil {
		return nil, errors.Join(err, l.Stop())
	}
	if err := l.register(); err != nil {
		return nil, errors.Join(err, l.Stop())
	}
	return l, nil
}

// startClusters starts every API server concurrently. The platform and
// onboarding clusters have every Marketplane CRD; MCP and workload clusters
// start empty, as fresh clusters do.
func (l *Landscape) startClusters() error {
	empty := []testenv.Option{testenv.WithCRDs()}
	specs := map[string][]testenv.Option{
		"platform":   {testenv.WithControllerManager()},
		"onboarding": {testenv.WithControllerManager()},
	}
	mcpName := func(i int) string { return fmt.Sprintf("%s%d", MCPClusterPrefix, i) }
	mcps := l.opts.mcpClusters
	if l.opts.kcp {
		mcps = 0
	}
	for i := range mcps {
		specs[mcpName(i)] = empty
	}
	if l.opts.workload {
		specs[WorkloadClusterName] = empty
		if l.opts.workloadControllers {
			specs[WorkloadClusterName] = []testenv.Option{testenv.WithCRDs(), testenv.WithControllerManager()}
		}
	}
	// kcp takes longest to start: it starts beside the API servers.
	kcpDone := make(chan error, 1)
	if l.opts.kcp {
		go func() {
			k, err := testenv.NewKCP()
			l.KCP = k
			kcpDone <- err
		}()
	} else {
		kcpDone <- nil
	}
	clusters, err := testenv.NewMany(specs)
	if kerr := <-kcpDone; kerr != nil {
		err = errors.Join(err, fmt.Errorf("providertest: kcp: %w", kerr))
	}
	if err != nil {
		for _, c := range clusters {
			_ = c.Stop()
		}
		return err
	}
	l.Platform, l.Onboarding, l.Workload = clusters["platform"], clusters["onboarding"], clusters[WorkloadClusterName]
	l.MCPClusters = make([]*testenv.Cluster, mcps)
	for i := range l.MCPClusters {
		l.MCPClusters[i] = clusters[mcpName(i)]
	}
	return nil
}

// startControllers runs one manager on the platform cluster with the
// Cluster, ClusterRequest and AccessRequest controllers, and the
// ManagedControlPlane controller, for which the onboarding cluster is added
// to the manager.
func (l *Landscape) startControllers() error {
	mgr, err := ctrl.NewManager(l.Platform.Config, ctrl.Options{
		Scheme:                 l.Platform.Scheme,
		Logger:                 l.opts.log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Several landscapes (or the controllers under test) may run in
		// one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("providertest: manager: %w", err)
	}
	onboarding, err := cluster.New(l.Onboarding.Config, func(o *cluster.Options) {
		o.Scheme = l.Onboarding.Scheme
		o.Logger = l.opts.log
	})
	if err != nil {
		return fmt.Errorf("providertest: onboarding cluster: %w", err)
	}
	if err := mgr.Add(onboarding); err != nil {
		return fmt.Errorf("providertest: add onboarding cluster: %w", err)
	}
	// One client of the onboarding cluster for the tenant checks of both
	// request controllers.
	tenantCheck := clusters.OnboardingFromClusters(mgr.GetClient(), access.TargetTimeout)
	ropts := []clusters.RequestOption{
		clusters.WithRequestControllerName(ControllerNamePrefix + clusters.RequestControllerName),
		clusters.WithRequestOnboarding(tenantCheck),
	}
	if l.KCP != nil {
		// As the operator's --cluster-profile mcp=kcp.
		mcpProfile := map[string]string{clustersv1alpha1.PurposeMCP: KCPProfile}
		ropts = append(ropts, clusters.WithProvisioner(clusters.ByPurpose(nil, map[string]clusters.Provisioner{
			clustersv1alpha1.PurposeMCP: clusters.NewProfileProvisioner(mgr.GetClient(), mcpProfile),
		})), clusters.WithProvisionInterval(time.Second))
	}
	setups := []interface{ SetupWithManager(ctrl.Manager) error }{
		clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName(ControllerNamePrefix+clusters.ClusterControllerName)),
		clusters.NewRequestReconciler(mgr.GetClient(), ropts...),
		access.NewReconciler(mgr.GetClient(), access.WithName(ControllerNamePrefix+access.ControllerName), access.WithOnboarding(tenantCheck)),
		mcp.NewReconciler(onboarding, mgr,
			mcp.WithControllerName(ControllerNamePrefix+mcp.ControllerName),
			mcp.WithServicePollInterval(time.Second)),
	}
	if l.KCP != nil {
		setups = append(setups, kcpprovider.New(mgr.GetClient(), l.KCP.Config, KCPProviderName,
			kcpprovider.WithControllerName(ControllerNamePrefix+kcpprovider.ControllerName)))
	}
	for _, s := range setups {
		if err := s.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("providertest: setup controller: %w", err)
		}
	}
	if l.opts.images != nil {
		if err := l.setupDeployer(mgr); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan error, 1)
	go func() { l.done <- mgr.Start(ctx) }()
	return nil
}

// setupDeployer adds the provider deployment controller with a process
// deployer whose state lives in a temporary directory.
func (l *Landscape) setupDeployer(mgr ctrl.Manager) error {
	images := process.ImageMap{Source: "providertest.WithProviderImages"}
	for image, binary := range l.opts.images {
		images.Images = append(images.Images, process.ImageMapping{Image: image, Binary: binary})
	}
	// The operator's namespace holds the parameters of its admission
	// policies; in a real installation the operator runs there.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: provider.DefaultOperatorNamespace}}
	if err := l.Platform.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("providertest: create namespace %s: %w", ns.Name, err)
	}
	dir, err := os.MkdirTemp("", "providertest-providers-")
	if err != nil {
		return fmt.Errorf("providertest: provider state directory: %w", err)
	}
	l.stateDir = dir
	notifier := provider.NewNotifier()
	d, err := process.New(process.Config{
		StateDir: dir,
		Images:   images,
		Platform: mgr.GetConfig(),
		Client:   mgr.GetClient(),
	}, process.WithOnChange(notifier.Notify))
	if err != nil {
		return fmt.Errorf("providertest: %w", err)
	}
	l.deployer = d
	if err := provider.Setup(mgr, d, provider.WithNotifier(notifier), provider.WithEnvironment("providertest")); err != nil {
		return fmt.Errorf("providertest: setup provider controller: %w", err)
	}
	// Providers built on openMCP's libraries keep their requests for a
	// tenant in the tenant's MCP namespace.
	if err := mcpaccess.Setup(mgr, provider.DefaultOperatorNamespace); err != nil {
		return fmt.Errorf("providertest: setup MCP namespace access controller: %w", err)
	}
	return nil
}

// ProviderLogDir is the directory below which the process deployer keeps
// the providers' logs and state (one directory per provider), or "" without
// WithProviderImages.
func (l *Landscape) ProviderLogDir() string { return l.stateDir }

// ProviderImages returns a copy of the image map of WithProviderImages
// (provider image to binary), which the landscape's operator deploys by, or
// nil without it.
func (l *Landscape) ProviderImages() map[string]string { return maps.Clone(l.opts.images) }

// register creates the Clusters and their kubeconfig Secrets and waits until
// every Cluster is Ready.
func (l *Landscape) register() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.timeout)
	defer cancel()
	c := l.Platform.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ClustersNamespace}}); err != nil {
		return fmt.Errorf("providertest: create namespace %s: %w", ClustersNamespace, err)
	}
	if l.KCP != nil {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KCPClustersNamespace}}); err != nil {
			return fmt.Errorf("providertest: create namespace %s: %w", KCPClustersNamespace, err)
		}
		if err := c.Create(ctx, kcpProfile()); err != nil {
			return fmt.Errorf("providertest: create ClusterProfile %s: %w", KCPProfile, err)
		}
	}
	type registration struct {
		name    string
		target  *testenv.Cluster
		purpose string
		tenancy clustersv1alpha1.Tenancy
	}
	regs := []registration{{OnboardingClusterName, l.Onboarding, clustersv1alpha1.PurposeOnboarding, clustersv1alpha1.TenancyShared}}
	for i, m := range l.MCPClusters {
		regs = append(regs, registration{fmt.Sprintf("%s%d", MCPClusterPrefix, i), m, clustersv1alpha1.PurposeMCP, clustersv1alpha1.TenancyExclusive})
	}
	if l.Workload != nil {
		regs = append(regs, registration{WorkloadClusterName, l.Workload, clustersv1alpha1.PurposeWorkload, clustersv1alpha1.TenancyShared})
	}
	for _, r := range regs {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: r.name + "-kubeconfig", Namespace: ClustersNamespace},
			Data:       map[string][]byte{clusters.KubeconfigSecretKey: r.target.Kubeconfig},
		}
		if err := c.Create(ctx, secret); err != nil {
			return fmt.Errorf("providertest: create kubeconfig Secret of Cluster %s: %w", r.name, err)
		}
		cl := &clustersv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{
				Name:        r.name,
				Namespace:   ClustersNamespace,
				Annotations: map[string]string{clusters.KubeconfigSecretAnnotation: secret.Name},
			},
			Spec: clustersv1alpha1.ClusterSpec{Profile: Profile, Purposes: []string{r.purpose}, Tenancy: r.tenancy},
		}
		if err := c.Create(ctx, cl); err != nil {
			return fmt.Errorf("providertest: create Cluster %s: %w", r.name, err)
		}
		l.byName[r.name] = r.target
	}
	for _, r := range regs {
		cl := &clustersv1alpha1.Cluster{}
		key := client.ObjectKey{Namespace: ClustersNamespace, Name: r.name}
		err := poll(ctx, func(ctx context.Context) error {
			if err := c.Get(ctx, key, cl); err != nil {
				return err
			}
			if !apimeta.IsStatusConditionTrue(cl.Status.Conditions, common.ConditionTypeReady) {
				return fmt.Errorf("Cluster %s is not Ready%s", key, conditionText(cl.Status.Conditions, common.ConditionTypeReady))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("providertest: %w", err)
		}
	}
	return nil
}

// kcpProfile is the ClusterProfile of the MCP Clusters WithKCP.
func kcpProfile() *clustersv1alpha1.ClusterProfile {
	return &clustersv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: KCPProfile},
		Spec: clustersv1alpha1.ClusterProfileSpec{
			ProviderRef:       common.LocalObjectReference{Name: KCPProviderName},
			ProviderConfigRef: common.LocalObjectReference{Name: KCPProviderName},
			// kcp v0.28 serves the API of Kubernetes 1.32.
			SupportedVersions: []clustersv1alpha1.SupportedK8sVersion{{Version: "1.32.0"}},
		},
	}
}

// Cluster returns the API server of the registered Cluster name (for
// example OnboardingClusterName or "mcp-0"), or nil.
func (l *Landscape) Cluster(name string) *testenv.Cluster { return l.byName[name] }

// Stop stops the controllers and every API server. It is safe to call more
// than once.
func (l *Landscape) Stop() error {
	l.stopOnce.Do(func() {
		var errs []error
		if l.cancel != nil {
			l.cancel()
			if err := <-l.done; err != nil {
				errs = append(errs, fmt.Errorf("providertest: controllers: %w", err))
			}
		}
		if l.deployer != nil {
			// The providers' processes go before their API servers, so
			// that they do not log a storm of connection errors.
			if err := l.deployer.Close(); err != nil {
				errs = append(errs, fmt.Errorf("providertest: stop providers: %w", err))
			}
		}
		if l.stateDir != "" {
			if err := os.RemoveAll(l.stateDir); err != nil {
				errs = append(errs, fmt.Errorf("providertest: remove provider state: %w", err))
			}
		}
		all := append([]*testenv.Cluster{l.Platform, l.Onboarding, l.Workload}, l.MCPClusters...)
		for _, c := range all {
			if c != nil {
				if err := c.Stop(); err != nil {
					errs = append(errs, fmt.Errorf("providertest: stop %s: %w", c.Name, err))
				}
			}
		}
		if l.KCP != nil {
			if err := l.KCP.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("providertest: stop kcp: %w", err))
			}
		}
		l.stopErr = errors.Join(errs...)
	})
	return l.stopErr
}

// ProviderNamespace creates the namespace name on the platform cluster, the
// home of a provider under test (its POD_NAMESPACE), and deletes it when the
// test ends. A namespace of that name that is still terminating is waited
// for first.
func (l *Landscape) ProviderNamespace(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.timeout)
	defer cancel()
	c := l.Platform.Client
	err := poll(ctx, func(ctx context.Context) error {
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if apierrors.IsAlreadyExists(err) {
			ns := &corev1.Namespace{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
				return err
			}
			if ns.DeletionTimestamp.IsZero() {
				return nil
			}
			return fmt.Errorf("namespace %s is still terminating", name)
		}
		return err
	})
	if err != nil {
		t.Fatalf("providertest: provider namespace: %v", err)
	}
	t.Cleanup(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Delete(context.Background(), ns); client.IgnoreNotFound(err) != nil {
			t.Errorf("providertest: delete provider namespace %s: %v", name, err)
		}
	})
	return name
}
