package validation

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/install"
)

// Target is where a run takes place. This package makes Kubeconfigs;
// providertest.InProcess and providertest.InProcessLandscape start or use
// a landscape in this process, and `marketplane validate` connects to a
// local landscape. Other packages implement it to run the flow elsewhere.
type Target interface {
	// Name names the target in reports.
	Name() string
	// Start starts or connects to the target's clusters, for spec. On an
	// error it may return the clusters it reached so far.
	Start(ctx context.Context, spec Spec) (*Clusters, error)
	// Stop stops what Start started (nothing, for a connected target). The
	// flow calls it also when Start failed.
	Stop(ctx context.Context) error
}

// OwningTarget is a Target that owns its clusters: Start starts a
// landscape and Stop stops it (providertest.InProcess). It knows the
// binaries of its images before it starts, so that the flow fails an
// unmapped image before anything starts; its teardown step says
// "<Name> landscape stopped".
type OwningTarget interface {
	Target
	// PlannedBinaries returns, before Start, what Start will return as
	// Clusters.BinaryOf and Clusters.ImageHint for spec.
	PlannedBinaries(spec Spec) (binaryOf func(image string) (string, error), imageHint string)
}

// Cluster names of a Target's clusters and of CheckEnv.Kubeconfigs; the
// values of AnnotationCluster are the first two.
const (
	ClusterPlatform   = "platform"
	ClusterOnboarding = "onboarding"
	ClusterWorkload   = "workload"
	// ClusterMCP is the tenant's cluster in CheckEnv.Kubeconfigs.
	ClusterMCP = "mcp"
)

// Cluster is admin access to one cluster of a Target.
type Cluster struct {
	// Name is the cluster's role: ClusterPlatform, ClusterOnboarding or
	// ClusterWorkload.
	Name string
	// Config and Client reach the cluster as an admin.
	Config *rest.Config
	Client client.Client
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
}

// Clusters is what a started Target offers the flow.
type Clusters struct {
	// Platform and Onboarding are required.
	Platform, Onboarding *Cluster
	// Workload is nil when the target has no workload cluster the flow
	// knows of.
	Workload *Cluster
	// LogDir is the process deployer's state directory (its providers'
	// logs are in <LogDir>/serviceprovider-<name>), "" when the providers
	// do not run as local processes.
	LogDir string
	// LogHint says where the provider's logs are when LogDir is "".
	LogHint string
	// BinaryOf maps an image to the local binary that runs for it; nil
	// when providers do not run as local processes.
	BinaryOf func(image string) (string, error)
	// ImageHint says how to map an image that BinaryOf does not know.
	ImageHint string
}

// NewCluster builds admin access to the cluster called name from the
// kubeconfig file at path.
func NewCluster(name, path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of the %s cluster: %w", name, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s of the %s cluster: %w", path, name, err)
	}
	c, err := newClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("client of the %s cluster: %w", name, err)
	}
	return &Cluster{Name: name, Config: cfg, Client: c, Kubeconfig: path}, nil
}

// newClient returns an uncached client with the built-in, apiextensions
// and Marketplane types; other kinds go through unstructured objects.
func newClient(cfg *rest.Config) (client.Client, error) {
	scheme, err := install.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// Kubeconfigs connects to the platform and onboarding clusters of these
// admin kubeconfig files, whose operator deploys the provider. The flow
// knows no workload cluster there and collects no provider logs (the
// failure says where they are); the clusters are left as they are.
func Kubeconfigs(platform, onboarding string) Target {
	return &kubeconfigs{platform: platform, onboarding: onboarding}
}

type kubeconfigs struct{ platform, onboarding string }

func (t *kubeconfigs) Name() string { return "clusters" }

func (t *kubeconfigs) Start(_ context.Context, _ Spec) (*Clusters, error) {
	var errs []error
	p, err := NewCluster(ClusterPlatform, t.platform)
	errs = append(errs, err)
	o, err := NewCluster(ClusterOnboarding, t.onboarding)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Clusters{Platform: p, Onboarding: o}, nil
}

func (t *kubeconfigs) Stop(context.Context) error { return nil }

// logHintFor says where the logs of the provider name are on a cluster
// whose operator runs providers as pods.
func logHintFor(name string) string {
	ns := "sp-" + name
	return fmt.Sprintf("logs are not collected from this target: see `kubectl logs -n %s job/%s-init` and `kubectl logs -n %s deployment/%s` on the platform cluster", ns, ns, ns, ns)
}

// all lists the clusters cl has.
func (cl *Clusters) all() []*Cluster {
	var out []*Cluster
	for _, c := range []*Cluster{cl.Platform, cl.Onboarding, cl.Workload} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}
