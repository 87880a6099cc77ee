package stack

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/marketplane/marketplane/internal/landscape"
)

// DefaultTimeout bounds each step: a provider's init and run, the catalog,
// the broker.
const DefaultTimeout = 3 * time.Minute

// Configure adds the stack's steps to l, in order: the sample provider, the
// inter-operator with the sample catalog, the broker.
func Configure(l *landscape.Landscape) error {
	l.AddStep("sample provider", func(ctx context.Context, l *landscape.Landscape) error {
		return sampleProvider().start(ctx, l, DefaultTimeout)
	})
	l.AddStep("inter-operator and the sample catalog", func(ctx context.Context, l *landscape.Landscape) error {
		return startInteroperator(ctx, l, DefaultTimeout)
	})
	l.AddStep("OSB broker", func(ctx context.Context, l *landscape.Landscape) error {
		return startBroker(ctx, l, DefaultTimeout)
	})
	return nil
}

// sampleProvider is providers/sample, with a ProviderConfig of defaults.
func sampleProvider() provider {
	cfg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sample.services.openmcp.cloud/v1alpha1",
		"kind":       "ProviderConfig",
		"metadata":   map[string]any{"name": "sample"},
		"spec":       map[string]any{"pollInterval": "1m", "versions": []any{"v1"}},
	}}
	return provider{
		name:      "sample",
		binary:    "sample",
		config:    cfg,
		configCRD: "providerconfigs.sample.services.openmcp.cloud",
	}
}
