package validation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// Target is where a run takes place. The package's constructors make them:
// InProcess, InProcessLandscape, ExistingLandscape and Kubeconfigs.
type Target interface {
	// Name names the target in reports.
	Name() string
	// start starts or connects to the target's clusters, for spec.
	start(ctx context.Context, spec Spec) (*clusters, error)
	// stop stops what start started (nothing, for a connected target).
	stop(ctx context.Context) error
}

// cluster is admin access to one cluster.
type cluster struct {
	// name is the cluster's role: "platform", "onboarding", "workload".
	name   string
	config *rest.Config
	client client.Client
	// kubeconfig is the path of an admin kubeconfig file.
	kubeconfig string
}

// clusters is what a started target offers the flow.
type clusters struct {
	platform, onboarding *cluster
	// workload is nil when the target has no workload cluster the flow
	// knows of.
	workload *cluster
	// logDir is the process deployer's state directory (its providers'
	// logs are in <logDir>/serviceprovider-<name>), "" when the providers
	// do not run as local processes.
	logDir string
	// logHint says where the provider's logs are when logDir is "".
	logHint string
	// binaryOf maps an image to the local binary that runs for it; nil
	// when providers do not run as local processes.
	binaryOf func(image string) (string, error)
	// imageHint says how to map an image that binaryOf does not know.
	imageHint string
}

// newCluster builds admin access from a kubeconfig file.
func newCluster(name, path string) (*cluster, error) {
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
	return &cluster{name: name, config: cfg, client: c, kubeconfig: path}, nil
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

// imageMapOf builds an image map from a map of image to binary.
func imageMapOf(images map[string]string, source string) process.ImageMap {
	m := process.ImageMap{Source: source, Images: []process.ImageMapping{}}
	for image, binary := range images {
		m.Images = append(m.Images, process.ImageMapping{Image: image, Binary: binary})
	}
	return m
}

// InProcess is a target that starts API servers (platform, onboarding, an
// MCP cluster and a workload cluster with a controller manager, so that
// namespaces a provider deletes there finish deleting, but without nodes)
// and the operator's controllers with
// the process deployer in this process (providertest): Spec.Images maps the
// ServiceProvider's image to a local binary. opts come after the target's
// own options (WithProviderImages, WithWorkloadControllers). The API servers
// come from KUBEBUILDER_ASSETS or the nearest bin/ directory. Note that
// providertest registers its Clusters in the namespace
// providertest.ClustersNamespace. Each run starts (and its teardown stops)
// its own landscape; InProcessLandscape runs many flows on one.
func InProcess(opts ...providertest.Option) Target { return &inProcess{opts: opts} }

type inProcess struct {
	opts []providertest.Option
	l    *providertest.Landscape
}

func (t *inProcess) Name() string { return "in-process" }

func (t *inProcess) start(_ context.Context, spec Spec) (*clusters, error) {
	images := map[string]string{}
	for image, binary := range spec.Images {
		images[image] = binary
	}
	opts := append([]providertest.Option{providertest.WithProviderImages(images), providertest.WithWorkloadControllers()}, t.opts...)
	l, err := providertest.New(opts...)
	if err != nil {
		return nil, err
	}
	t.l = l
	cl, err := landscapeClusters(l, imageMapOf(images, "Spec.Images"),
		"map it to a binary in Spec.Images (marketplane validate: --binary or --image-map IMAGE=BINARY)")
	return &cl, err
}

// landscapeClusters returns the clusters of the in-process landscape l,
// whose operator deploys providers by images, with the hint a report gives
// for an unmapped image.
func landscapeClusters(l *providertest.Landscape, images process.ImageMap, imageHint string) (clusters, error) {
	cl := clusters{logDir: l.ProviderLogDir(), binaryOf: images.Binary, imageHint: imageHint}
	for _, c := range []struct {
		dst  **cluster
		name string
		tc   *testenv.Cluster
	}{{&cl.platform, clusterPlatform, l.Platform}, {&cl.onboarding, clusterOnboarding, l.Onboarding}, {&cl.workload, clusterWorkload, l.Workload}} {
		if c.tc == nil {
			continue
		}
		path, err := c.tc.KubeconfigPath()
		if err != nil {
			return cl, err
		}
		*c.dst = &cluster{name: c.name, config: c.tc.Config, client: c.tc.Client, kubeconfig: path}
	}
	return cl, nil
}

func (t *inProcess) stop(context.Context) error {
	if t.l == nil {
		return nil
	}
	return t.l.Stop()
}

// InProcessLandscape is a target on a landscape the caller already started
// in this process (providertest.New or providertest.Start), so that a test
// package can run many flows on one set of API servers instead of starting
// four for each flow as InProcess does. The landscape must run the
// operator's process deployer (providertest.WithProviderImages), and it
// should have a workload cluster with a controller manager
// (providertest.WithWorkloadControllers) as InProcess's has. The
// ServiceProvider's image must be in the landscape's image map
// (Landscape.ProviderImages): Spec.Images is not used, and an unmapped image
// fails the setup step. Failures carry the provider's logs, as with
// InProcess. Teardown leaves the landscape running; the caller stops it.
//
// A flow expects the clusters as a fresh landscape has them with respect to
// its Spec: no ServiceProvider of its name, no service object or control
// plane of its names, and no namespace of its objects still being deleted.
// A flow leaves them so when it passes (the namespaces it created on the
// onboarding cluster may still be terminating for a moment; the CRDs the
// provider's init installed stay by design). Flows may run concurrently on
// one landscape only when their ServiceProviders, the API groups they
// register and their control planes differ and the landscape has an MCP
// cluster for each control plane at a time (MCP clusters are Exclusive).
func InProcessLandscape(l *providertest.Landscape) Target { return &inProcessLandscape{l: l} }

type inProcessLandscape struct {
	l *providertest.Landscape
	// once builds cl (or err) for every run: concurrent runs share them.
	once sync.Once
	cl   clusters
	err  error
}

func (t *inProcessLandscape) Name() string { return "in-process landscape" }

func (t *inProcessLandscape) start(context.Context, Spec) (*clusters, error) {
	t.once.Do(func() { t.cl, t.err = t.connect() })
	if t.err != nil {
		return nil, t.err
	}
	cl := t.cl
	return &cl, nil
}

// connect builds the clusters of the landscape once.
func (t *inProcessLandscape) connect() (clusters, error) {
	l := t.l
	if l == nil || l.Platform == nil || l.Onboarding == nil {
		return clusters{}, errors.New("no running providertest.Landscape given")
	}
	images := l.ProviderImages()
	if images == nil || l.ProviderLogDir() == "" {
		return clusters{}, errors.New("the landscape runs no provider deployer: start it with providertest.WithProviderImages")
	}
	return landscapeClusters(l, imageMapOf(images, "providertest.WithProviderImages"),
		"the landscape's operator deploys only the images of providertest.WithProviderImages given when it started")
}

// stop leaves the landscape running: its caller started it.
func (t *inProcessLandscape) stop(context.Context) error { return nil }

// ExistingLandscape connects to the local landscape running from stateDir
// (`marketplane landscape up`). Its operator loaded its image map
// (<stateDir>/images.yaml) when it started, so the ServiceProvider's image
// must be mapped there: Spec.Images is not used, and an unmapped image
// fails the setup step with the command that maps it. The landscape is
// left running.
func ExistingLandscape(stateDir string) Target { return &existingLandscape{dir: stateDir} }

type existingLandscape struct{ dir string }

func (t *existingLandscape) Name() string { return "landscape " + t.dir }

func (t *existingLandscape) start(_ context.Context, spec Spec) (*clusters, error) {
	st, err := landscape.ReadStatus(t.dir)
	if errors.Is(err, controlplane.ErrNoState) {
		return nil, fmt.Errorf("no landscape in %s: start one with `marketplane landscape up --state-dir %s`: %w", t.dir, t.dir, err)
	}
	if err != nil {
		return nil, err
	}
	layout := controlplane.Layout{Dir: st.Dir}
	imagesFile := layout.Path("images.yaml")
	m, err := process.LoadImageMap(imagesFile)
	if err != nil {
		return nil, fmt.Errorf("image map of the landscape in %s: %w", st.Dir, err)
	}
	cl := &clusters{
		logDir:   layout.Path("providers"),
		binaryOf: m.Binary,
	}
	if spec.Provider != nil {
		image, _, _ := unstructuredString(spec.Provider, "spec", "image")
		if _, err := m.Binary(image); err != nil {
			return nil, fmt.Errorf("the landscape's operator cannot deploy image %q: it is not mapped in %s, which the operator reads once at start; "+
				"stop the landscape and run `marketplane landscape up --state-dir %s --image-map %s=BINARY`", image, imagesFile, st.Dir, image)
		}
	}
	if !st.Running {
		return nil, fmt.Errorf("the landscape in %s is not running (last phase %s): run `marketplane landscape up --state-dir %s`", st.Dir, st.State.Phase, st.Dir)
	}
	for _, c := range []struct {
		dst      **cluster
		name     string
		optional bool
	}{{&cl.platform, landscape.ClusterPlatform, false}, {&cl.onboarding, landscape.ClusterOnboarding, false}, {&cl.workload, landscape.ClusterWorkload, true}} {
		rec := st.State.Clusters[c.name]
		if rec == nil || rec.Kubeconfig == "" {
			if c.optional {
				continue
			}
			return nil, fmt.Errorf("the landscape in %s has no %s cluster", st.Dir, c.name)
		}
		if *c.dst, err = newCluster(c.name, rec.Kubeconfig); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

func (t *existingLandscape) stop(context.Context) error { return nil }

// Kubeconfigs connects to the platform and onboarding clusters of these
// admin kubeconfig files, whose operator deploys the provider. The flow
// knows no workload cluster there and collects no provider logs (the
// failure says where they are); the clusters are left as they are.
func Kubeconfigs(platform, onboarding string) Target {
	return &kubeconfigs{platform: platform, onboarding: onboarding}
}

type kubeconfigs struct{ platform, onboarding string }

func (t *kubeconfigs) Name() string { return "clusters" }

func (t *kubeconfigs) start(_ context.Context, _ Spec) (*clusters, error) {
	var errs []error
	p, err := newCluster("platform", t.platform)
	errs = append(errs, err)
	o, err := newCluster("onboarding", t.onboarding)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &clusters{platform: p, onboarding: o}, nil
}

func (t *kubeconfigs) stop(context.Context) error { return nil }

// logHintFor says where the logs of the provider name are on a cluster
// whose operator runs providers as pods.
func logHintFor(name string) string {
	ns := "sp-" + name
	return fmt.Sprintf("logs are not collected from this target: see `kubectl logs -n %s job/%s-init` and `kubectl logs -n %s deployment/%s` on the platform cluster", ns, ns, ns, ns)
}

// all lists the clusters cl has.
func (cl *clusters) all() []*cluster {
	var out []*cluster
	for _, c := range []*cluster{cl.platform, cl.onboarding, cl.workload} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}
