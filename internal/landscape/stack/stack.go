package stack

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape"
)

// SampleServerImage is the image of the sample provider's server
// Deployments (ProviderConfig spec.workload) on the landscape. kwok runs no
// containers, so it is never pulled.
const SampleServerImage = "registry.invalid/marketplane/sample-server:v1"

// Configure adds the stack's steps to l, in order: the sample provider
// together with the inter-operator, the sample catalog and the marketplace,
// then the broker, then the web console. Each step waits as long as the
// landscape's start timeout for what it starts.
func Configure(l *landscape.Landscape) error {
	// The two providers do not depend on each other, and starting one is
	// mostly waiting (for its init, its run process, its CRDs to be
	// served): at once, the landscape is ready seconds sooner.
	l.AddStep("sample provider, inter-operator, the sample catalog and the marketplace", func(ctx context.Context, l *landscape.Landscape) error {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error {
			if err := sampleProvider().start(gctx, l, l.StartTimeout()); err != nil {
				return fmt.Errorf("sample provider: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			if err := startInteroperator(gctx, l, l.StartTimeout()); err != nil {
				return fmt.Errorf("inter-operator: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			if err := startMarketplace(gctx, l, l.StartTimeout()); err != nil {
				return fmt.Errorf("marketplace: %w", err)
			}
			return nil
		})
		return g.Wait()
	})
	l.AddStep("OSB broker", func(ctx context.Context, l *landscape.Landscape) error {
		return startBroker(ctx, l, l.StartTimeout())
	})
	l.AddStep("web console", func(ctx context.Context, l *landscape.Landscape) error {
		return startConsole(ctx, l, l.StartTimeout())
	})
	return nil
}

// sampleProvider is providers/sample, with a ProviderConfig of defaults
// plus spec.workload: the provider runs each Sample's server as a
// Deployment on the workload cluster, whose pods kwok simulates (the image
// is never pulled), and a Sample is Ready once that Deployment is
// Available, as with a real service such as Velero.
func sampleProvider() provider {
	cfg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sample.services.openmcp.cloud/v1alpha1",
		"kind":       "ProviderConfig",
		"metadata":   map[string]any{"name": "sample"},
		"spec": map[string]any{
			"pollInterval": "1m",
			"versions":     []any{"v1"},
			"workload":     map[string]any{"image": SampleServerImage},
		},
	}}
	return provider{
		name:      "sample",
		binary:    "sample",
		config:    cfg,
		configCRD: "providerconfigs.sample.services.openmcp.cloud",
		// Ordered through OSB too (docs/marketplace.md): a binding may
		// manage the SampleObjects of the tenant's control plane.
		annotations: map[string]string{
			marketplacev1alpha1.AnnotationOSB:          "true",
			marketplacev1alpha1.AnnotationBindingRules: SampleBindingRules,
		},
	}
}

// SampleBindingRules are what an OSB binding of the sample provider's
// offering may do on the instance's control plane: manage SampleObjects,
// the sample's DomainServiceAPI, and nothing else.
const SampleBindingRules = `[{"apiGroups":["domain.sample.services.openmcp.cloud"],"resources":["sampleobjects"],"verbs":["get","list","watch","create","update","patch","delete"]}]`
