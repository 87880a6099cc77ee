package charts_test

import (
	"testing"

	"helm.sh/helm/v3/pkg/lint"

	"github.com/marketplane/marketplane/charts"
)

// TestHelmLint runs Helm's linter, as `helm lint charts/marketplane --set
// global.imageRegistry=registry.example.com` does, with the default values
// and with every optional part on: it must report nothing at all, not even
// the informational "icon is recommended".
func TestHelmLint(t *testing.T) {
	on := charts.MonitoringValues()
	on["serviceMonitor"] = map[string]any{"enabled": true}
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{name: "defaults", values: charts.WithExampleRegistry(nil)},
		{name: "monitoring", values: charts.WithExampleRegistry(on)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			linter := lint.All(charts.ChartName, tc.values, charts.DefaultNamespace, false)
			for _, m := range linter.Messages {
				t.Errorf("helm lint: %s", m)
			}
		})
	}
}
