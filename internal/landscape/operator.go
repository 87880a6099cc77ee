package landscape

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/marketplane/marketplane/api/install"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/pki"
	"github.com/marketplane/marketplane/internal/operator/app"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/internal/operator/provider"
)

// operator is the provider operator running in-process.
type operator struct {
	cancel        context.CancelFunc
	done          chan struct{}
	err           error
	closeDeployer func()
}

// ImageMapFile is the process deployer's image map, in the state directory.
func (l *Landscape) ImageMapFile() string { return l.Layout.Path("images.yaml") }

// OperatorStateDir is the process deployer's state directory: a directory
// per provider with its logs and credentials.
func (l *Landscape) OperatorStateDir() string { return l.Layout.Path("providers") }

// startOperator writes the image map and runs the operator's controllers on
// the platform cluster, like `marketplane-operator run --deployer=process`,
// with the local cluster provider.
func (l *Landscape) startOperator() error {
	images := l.cfg.Images
	if len(images) == 0 {
		// A resumed landscape runs the providers the user mapped before
		// (their objects are still there) without the flags again.
		if images = recordedUserImages(l.ImageMapFile()); len(images) > 0 {
			l.progressf("keeping the %d image mapping(s) of the earlier run (--image-map replaces them)", len(images))
		}
	}
	if err := WriteImageMap(l.ImageMapFile(), l.Binaries.Dir, images); err != nil {
		return err
	}
	scheme, err := install.NewScheme()
	if err != nil {
		return err
	}
	managed := labels.SelectorFromSet(labels.Set{providerv1alpha1.ManagedByLabel: provider.ManagedByValue})
	cfg := rest.CopyConfig(l.Platform.Config)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 l.log.WithName("operator"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}:       {Label: managed},
			&appsv1.Deployment{}: {Label: managed},
		}},
		// One operator per process, but a test may start a landscape
		// again in the same process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("operator: create manager: %w", err)
	}
	onboarding := l.Onboarding.Config
	closeDeployer, err := app.Setup(mgr, app.Config{
		Environment: l.cfg.Environment,
		Namespace:   Namespace,
		Deployer:    app.DeployerProcess,
		ImageMap:    l.ImageMapFile(),
		StateDir:    l.OperatorStateDir(),
		Provisioner: l.provisioner,
		OnboardingConfig: func(context.Context, client.Reader) (*rest.Config, error) {
			return rest.CopyConfig(onboarding), nil
		},
		OnboardingRetries: time.Second,
	})
	if err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	octx, cancel := context.WithCancel(l.runCtx)
	op := &operator{cancel: cancel, done: make(chan struct{}), closeDeployer: closeDeployer}
	go func() {
		defer close(op.done)
		op.err = mgr.Start(octx)
		if octx.Err() == nil {
			if op.err == nil {
				op.err = errors.New("stopped unexpectedly")
			}
			l.fail(fmt.Errorf("operator: %w", op.err))
		}
	}()
	l.operator = op
	return nil
}

// stop stops the operator and then the providers its deployer runs.
func (o *operator) stop(timeout time.Duration) error {
	o.cancel()
	var err error
	select {
	case <-o.done:
		if o.err != nil && !errors.Is(o.err, context.Canceled) {
			err = fmt.Errorf("operator: %w", o.err)
		}
	case <-time.After(timeout + 20*time.Second):
		err = errors.New("operator did not stop in time")
	}
	o.closeDeployer()
	return err
}

// failed returns the operator's error once it has stopped, else nil.
func (o *operator) failed() error {
	select {
	case <-o.done:
		if o.err == nil {
			return errors.New("operator stopped")
		}
		return fmt.Errorf("operator: %w", o.err)
	default:
		return nil
	}
}

// WriteImageMap writes the process deployer's image map to path: an entry
// Image(b) → <binDir>/<b> for every executable b in binDir other than the
// control plane's, and then extra. Any tag of such an image maps to the
// binary (repo:*).
func WriteImageMap(path, binDir string, extra []process.ImageMapping) error {
	m := process.ImageMap{Images: []process.ImageMapping{}}
	entries, err := os.ReadDir(binDir)
	if err != nil {
		return fmt.Errorf("list binaries: %w", err)
	}
	skip := []string{controlplane.EtcdBinary, controlplane.APIServerBinary, controlplane.ControllerManagerBinary, controlplane.SchedulerBinary, controlplane.KwokBinary}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || slices.Contains(skip, name) {
			continue
		}
		if fi, err := e.Info(); err != nil || fi.Mode()&0o111 == 0 {
			continue
		}
		m.Images = append(m.Images, process.ImageMapping{
			Image:  ImageRegistry + "/" + name + ":" + process.AnyTag,
			Binary: filepath.Join(binDir, name),
		})
	}
	m.Images = append(m.Images, extra...)
	if err := m.Validate(); err != nil {
		return fmt.Errorf("image map: %w", err)
	}
	data, err := yaml.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode image map: %w", err)
	}
	return pki.WriteFileAtomic(path, data, 0o600)
}
