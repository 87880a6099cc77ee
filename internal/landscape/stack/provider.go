package stack

import (
	"context"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape"
)

// provider is a ServiceProvider (or PlatformService) the landscape starts,
// and its ProviderConfig.
type provider struct {
	// name of the ServiceProvider and of its ProviderConfig.
	name string
	// platformService deploys it as a PlatformService rather than a
	// ServiceProvider.
	platformService bool
	// binary in bin/ that the image maps to.
	binary string
	// config is the ProviderConfig to create once its CRD is installed.
	config *unstructured.Unstructured
	// configCRD names the ProviderConfig's CRD.
	configCRD string
	// policy is the ServiceProvider's spec.accessPolicy; nil for the
	// defaults.
	policy *providerv1alpha1.AccessPolicy
	// annotations are set on the ServiceProvider (or PlatformService),
	// e.g. the marketplace's opt-in into OSB.
	annotations map[string]string
}

// start creates the ServiceProvider (the operator then runs its init and
// run through the process deployer), creates the ProviderConfig once init
// installed its CRD, and waits until the provider is Ready.
func (p provider) start(ctx context.Context, l *landscape.Landscape, timeout time.Duration) error {
	c := l.Platform.Client
	kind := "ServiceProvider"
	var obj client.Object
	var spec *providerv1alpha1.DeploymentSpec
	if p.platformService {
		ps := &providerv1alpha1.PlatformService{ObjectMeta: metav1.ObjectMeta{Name: p.name}}
		kind, obj, spec = "PlatformService", ps, &ps.Spec.DeploymentSpec
	} else {
		sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: p.name}}
		obj, spec = sp, &sp.Spec.DeploymentSpec
	}
	if err := ensure(ctx, c, obj, func() {
		spec.Image = landscape.Image(p.binary)
		// Nothing scrapes a landscape's providers and the process
		// deployer puts no Service in front of them; a fixed port could
		// be taken by another program on the machine.
		spec.Metrics = &providerv1alpha1.MetricsConfiguration{Disabled: true}
		spec.AccessPolicy = p.policy
		if len(p.annotations) > 0 {
			a := obj.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			maps.Copy(a, p.annotations)
			obj.SetAnnotations(a)
		}
	}); err != nil {
		return err
	}
	watch := newProviderWatch(l, kind, p.name)
	if p.config != nil {
		// The ProviderConfig's kind is served once init installed its CRD
		// and the CRD is Established; a provider whose init fails ends
		// the wait at once.
		if err := waitCRDEstablished(ctx, c, timeout, p.configCRD, p.name+" init", watch.failed); err != nil {
			return err
		}
		if err := createOnceServed(ctx, c, timeout, p.config, watch.failed); err != nil {
			return err
		}
	}
	return watch.waitReady(ctx, timeout)
}

// createOnceServed creates obj (an existing one is left as it is), retrying
// while its kind is missing from the client's discovery: a CRD that was
// just Established can be for a moment. check may end the wait.
func createOnceServed(ctx context.Context, c client.Client, timeout time.Duration, obj *unstructured.Unstructured, check func(context.Context) error) error {
	var last lastError
	what := obj.GetKind() + " " + obj.GetName()
	return waitFor(ctx, timeout, what+" created", func(ctx context.Context) (bool, error) {
		if check != nil {
			if err := check(ctx); err != nil {
				return false, err
			}
		}
		err := c.Create(ctx, obj.DeepCopy())
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
			return true, nil
		case apimeta.IsNoMatchError(err):
			return last.note(err)
		}
		return false, fmt.Errorf("create %s: %w", what, err)
	}, last.String)
}

// ensure creates obj after mutate, or updates an existing one with mutate
// applied: a resumed landscape finds its objects already there.
func ensure(ctx context.Context, c client.Client, obj client.Object, mutate func()) error {
	key := client.ObjectKeyFromObject(obj)
	if err := c.Get(ctx, key, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get %T %s: %w", obj, key, err)
		}
		mutate()
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, key, err)
		}
		return nil
	}
	mutate()
	if err := c.Update(ctx, obj); err != nil {
		return fmt.Errorf("update %T %s: %w", obj, key, err)
	}
	return nil
}
