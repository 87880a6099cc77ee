package stack

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/pkg/crdinstall"
)

// provider is a ServiceProvider the landscape starts, and its
// ProviderConfig.
type provider struct {
	// name of the ServiceProvider and of its ProviderConfig.
	name string
	// binary in bin/ that the image maps to.
	binary string
	// config is the ProviderConfig to create once its CRD is installed.
	config *unstructured.Unstructured
	// configCRD names the ProviderConfig's CRD.
	configCRD string
	// policy is the ServiceProvider's spec.accessPolicy; nil for the
	// defaults.
	policy *providerv1alpha1.AccessPolicy
}

// start creates the ServiceProvider (the operator then runs its init and
// run through the process deployer), creates the ProviderConfig once init
// installed its CRD, and waits until the provider is Ready.
func (p provider) start(ctx context.Context, l *landscape.Landscape, timeout time.Duration) error {
	c := l.Platform.Client
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: p.name}}
	if err := ensure(ctx, c, sp, func() {
		sp.Spec.Image = landscape.Image(p.binary)
		// Nothing scrapes a landscape's providers and the process
		// deployer puts no Service in front of them; a fixed port could
		// be taken by another program on the machine.
		sp.Spec.Metrics = &providerv1alpha1.MetricsConfiguration{Disabled: true}
		sp.Spec.AccessPolicy = p.policy
	}); err != nil {
		return err
	}
	if p.config != nil {
		if err := waitFor(ctx, timeout, fmt.Sprintf("CRD %s (installed by %s init) established", p.configCRD, p.name), func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: p.configCRD}, crd); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return crdinstall.Established(crd), nil
		}); err != nil {
			return err
		}
		// An established CRD can still be missing from the discovery
		// the client maps kinds with for a moment: retry on no match.
		if err := waitFor(ctx, timeout, "ProviderConfig "+p.name+" created", func(ctx context.Context) (bool, error) {
			err := c.Create(ctx, p.config.DeepCopy())
			switch {
			case err == nil || apierrors.IsAlreadyExists(err):
				return true, nil
			case apimeta.IsNoMatchError(err):
				return false, nil
			}
			return false, fmt.Errorf("create ProviderConfig %s: %w", p.name, err)
		}); err != nil {
			return err
		}
	}
	return waitFor(ctx, timeout, "ServiceProvider "+p.name+" Ready", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(sp.Status.Conditions, string(providerv1alpha1.ConditionReady)), nil
	})
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

// waitFor polls cond until it holds or timeout passes; the error names what
// it waited for.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
