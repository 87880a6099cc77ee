package providertest

import (
	"context"
	"errors"
	"sync"

	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/testenv"
	"github.com/marketplane/marketplane/pkg/validation"
)

// InProcess is a validation target that starts API servers (platform,
// onboarding, an MCP cluster and a workload cluster with a controller
// manager, so that namespaces a provider deletes there finish deleting,
// but without nodes) and the operator's controllers with the process
// deployer in this process: Spec.Images maps the ServiceProvider's image
// to a local binary. opts come after the target's own options
// (WithProviderImages, WithWorkloadControllers). The API servers come from
// KUBEBUILDER_ASSETS or the nearest bin/ directory. The landscape registers
// its Clusters in the namespace ClustersNamespace. Each run starts (and its
// teardown stops) its own landscape; InProcessLandscape runs many flows on
// one.
func InProcess(opts ...Option) validation.OwningTarget { return &inProcess{opts: opts} }

// specImagesHint is how to map an image of an InProcess run.
const specImagesHint = "map it to a binary in Spec.Images (marketplane validate: --binary or --image-map IMAGE=BINARY)"

type inProcess struct {
	opts []Option
	l    *Landscape
}

func (t *inProcess) Name() string { return "in-process" }

func (t *inProcess) PlannedBinaries(spec validation.Spec) (func(string) (string, error), string) {
	return imageMapOf(spec.Images, "Spec.Images").Binary, specImagesHint
}

func (t *inProcess) Start(_ context.Context, spec validation.Spec) (*validation.Clusters, error) {
	images := map[string]string{}
	for image, binary := range spec.Images {
		images[image] = binary
	}
	opts := append([]Option{WithProviderImages(images), WithWorkloadControllers()}, t.opts...)
	l, err := New(opts...)
	if err != nil {
		return nil, err
	}
	t.l = l
	cl, err := landscapeClusters(l, imageMapOf(images, "Spec.Images"), specImagesHint)
	return &cl, err
}

func (t *inProcess) Stop(context.Context) error {
	if t.l == nil {
		return nil
	}
	return t.l.Stop()
}

// imageMapOf builds an image map from a map of image to binary.
func imageMapOf(images map[string]string, source string) process.ImageMap {
	m := process.ImageMap{Source: source, Images: []process.ImageMapping{}}
	for image, binary := range images {
		m.Images = append(m.Images, process.ImageMapping{Image: image, Binary: binary})
	}
	return m
}

// landscapeClusters returns the clusters of the in-process landscape l,
// whose operator deploys providers by images, with the hint a report gives
// for an unmapped image.
func landscapeClusters(l *Landscape, images process.ImageMap, imageHint string) (validation.Clusters, error) {
	cl := validation.Clusters{LogDir: l.ProviderLogDir(), BinaryOf: images.Binary, ImageHint: imageHint}
	for _, c := range []struct {
		dst  **validation.Cluster
		name string
		tc   *testenv.Cluster
	}{
		{&cl.Platform, validation.ClusterPlatform, l.Platform},
		{&cl.Onboarding, validation.ClusterOnboarding, l.Onboarding},
		{&cl.Workload, validation.ClusterWorkload, l.Workload},
	} {
		if c.tc == nil {
			continue
		}
		path, err := c.tc.KubeconfigPath()
		if err != nil {
			return cl, err
		}
		*c.dst = &validation.Cluster{Name: c.name, Config: c.tc.Config, Client: c.tc.Client, Kubeconfig: path}
	}
	return cl, nil
}

// InProcessLandscape is a validation target on a landscape the caller
// already started in this process (New or Start), so that a test package
// can run many flows on one set of API servers instead of starting four
// for each flow as InProcess does. The landscape must run the operator's
// process deployer (WithProviderImages), and it should have a workload
// cluster with a controller manager (WithWorkloadControllers) as
// InProcess's has. The ServiceProvider's image must be in the landscape's
// image map (Landscape.ProviderImages): Spec.Images is not used, and an
// unmapped image fails the setup step. Failures carry the provider's logs,
// as with InProcess. Teardown leaves the landscape running; the caller
// stops it.
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
func InProcessLandscape(l *Landscape) validation.Target { return &inProcessLandscape{l: l} }

type inProcessLandscape struct {
	l *Landscape
	// once builds cl (or err) for every run: concurrent runs share them.
	once sync.Once
	cl   validation.Clusters
	err  error
}

func (t *inProcessLandscape) Name() string { return "in-process landscape" }

func (t *inProcessLandscape) Start(context.Context, validation.Spec) (*validation.Clusters, error) {
	t.once.Do(func() { t.cl, t.err = t.connect() })
	if t.err != nil {
		return nil, t.err
	}
	cl := t.cl
	return &cl, nil
}

// connect builds the clusters of the landscape once.
func (t *inProcessLandscape) connect() (validation.Clusters, error) {
	l := t.l
	if l == nil || l.Platform == nil || l.Onboarding == nil {
		return validation.Clusters{}, errors.New("no running providertest.Landscape given")
	}
	images := l.ProviderImages()
	if images == nil || l.ProviderLogDir() == "" {
		return validation.Clusters{}, errors.New("the landscape runs no provider deployer: start it with providertest.WithProviderImages")
	}
	return landscapeClusters(l, imageMapOf(images, "providertest.WithProviderImages"),
		"the landscape's operator deploys only the images of providertest.WithProviderImages given when it started")
}

// Stop leaves the landscape running: its caller started it.
func (t *inProcessLandscape) Stop(context.Context) error { return nil }
