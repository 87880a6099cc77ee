// Package validationtarget runs the validation flow on the local landscape
// that `marketplane landscape up` started.
package validationtarget

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/validation"
)

// ExistingLandscape connects to the local landscape running from stateDir
// (`marketplane landscape up`). Its operator loaded its image map
// (<stateDir>/images.yaml) when it started, so the ServiceProvider's image
// must be mapped there: Spec.Images is not used, and an unmapped image
// fails the setup step with the command that maps it. The landscape is
// left running.
func ExistingLandscape(stateDir string) validation.Target { return &existingLandscape{dir: stateDir} }

type existingLandscape struct{ dir string }

func (t *existingLandscape) Name() string { return "landscape " + t.dir }

func (t *existingLandscape) Start(_ context.Context, spec validation.Spec) (*validation.Clusters, error) {
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
	if err := checkImageMapped(spec, m, imagesFile, st.Dir); err != nil {
		return nil, err
	}
	if !st.Running {
		return nil, fmt.Errorf("the landscape in %s is not running (last phase %s): run `marketplane landscape up --state-dir %s`", st.Dir, st.State.Phase, st.Dir)
	}
	cl := &validation.Clusters{
		LogDir:   layout.Path("providers"),
		BinaryOf: m.Binary,
	}
	if err := connect(cl, st); err != nil {
		return nil, err
	}
	return cl, nil
}

// checkImageMapped fails when the image of spec's ServiceProvider is not
// in the landscape's image map m, read from imagesFile.
func checkImageMapped(spec validation.Spec, m process.ImageMap, imagesFile, dir string) error {
	if spec.Provider == nil {
		return nil
	}
	image, _, _ := unstructured.NestedString(spec.Provider.Object, "spec", "image")
	if _, err := m.Binary(image); err != nil {
		return fmt.Errorf("the landscape's operator cannot deploy image %q: it is not mapped in %s, which the operator reads once at start; "+
			"stop the landscape and run `marketplane landscape up --state-dir %s --image-map %s=BINARY`", image, imagesFile, dir, image)
	}
	return nil
}

// connect adds the landscape's clusters to cl; the workload cluster is
// optional.
func connect(cl *validation.Clusters, st *landscape.Status) error {
	for _, c := range []struct {
		dst      **validation.Cluster
		name     string
		optional bool
	}{
		{&cl.Platform, landscape.ClusterPlatform, false},
		{&cl.Onboarding, landscape.ClusterOnboarding, false},
		{&cl.Workload, landscape.ClusterWorkload, true},
	} {
		rec := st.State.Clusters[c.name]
		if rec == nil || rec.Kubeconfig == "" {
			if c.optional {
				continue
			}
			return fmt.Errorf("the landscape in %s has no %s cluster", st.Dir, c.name)
		}
		var err error
		if *c.dst, err = validation.NewCluster(c.name, rec.Kubeconfig); err != nil {
			return err
		}
	}
	return nil
}

func (t *existingLandscape) Stop(context.Context) error { return nil }
