package charts_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketplane/marketplane/charts"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		expr string
		want []string
	}{
		{name: "selector and range", expr: `sum by (namespace, kind) (rate(a_total{namespace=~"x|y", code="<error>"}[5m])) > 0`, want: []string{"a_total"}},
		{name: "histogram", expr: `histogram_quantile(0.99, sum by (le) (rate(h_seconds_bucket{endpoint="provision"}[10m]))) > 1e3`, want: []string{"h_seconds_bucket"}},
		{name: "ratio", expr: "sum without (pod) (rate(r_total[5m])) / on (ns) group_left sum(rate(s_total[5m]))", want: []string{"r_total", "s_total"}},
		{name: "bare names and keywords", expr: "g == 0 and bool h offset 5m", want: []string{"g", "h"}},
		{name: "label value that looks like a name", expr: `x{name="leader_election_master_status"}`, want: []string{"x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, charts.MetricNames(tc.expr)); diff != "" {
				t.Errorf("MetricNames(%q) (-want +got):\n%s", tc.expr, diff)
			}
		})
	}
}

// wantAlerts are the alerts the chart's PrometheusRule must have.
var wantAlerts = []string{
	"MarketplaneInstancesFailing", "MarketplaneProvisioningSlow", "MarketplaneBrokerProvisionSlow",
	"MarketplaneBroker5xx", "MarketplaneAccessRequestsDenied", "MarketplaneLeaderLost",
	"MarketplaneClusterUnreachable", "MarketplaneReconcileErrors",
}

// TestMonitoringRender: the PrometheusRule and the dashboard are off by
// default; turned on, the rule has every alert and each alert and panel
// names metrics of a known component.
func TestMonitoringRender(t *testing.T) {
	objs, err := charts.Render(charts.WithExampleRegistry(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := charts.MonitoringMetrics(objs); err == nil {
		t.Error("the default values render a PrometheusRule or a dashboard; both must be off by default")
	}
	objs, err = charts.Render(charts.WithExampleRegistry(charts.MonitoringValues()))
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	rule := mustFind(t, objs, "PrometheusRule", charts.DefaultReleaseName)
	for _, g := range nested[[]any](t, rule, "spec", "groups") {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			alerts = append(alerts, r.(map[string]any)["alert"].(string))
		}
	}
	if diff := cmp.Diff(wantAlerts, alerts); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	byComponent, err := charts.MonitoringMetrics(objs)
	if err != nil {
		t.Fatal(err)
	}
	for component, names := range byComponent {
		t.Logf("%s: %v", component, names)
		if !slices.Contains([]string{"operator", "broker", "interoperator"}, component) {
			t.Errorf("metrics %v are attributed to %q, which is no component the install tests scrape", names, component)
		}
	}
}

// TestMetricsDocumented: docs/metrics.md names every metric the chart's
// alerts and dashboard read (a histogram by its family name), in backticks.
func TestMetricsDocumented(t *testing.T) {
	objs, err := charts.Render(charts.WithExampleRegistry(charts.MonitoringValues()))
	if err != nil {
		t.Fatal(err)
	}
	byComponent, err := charts.MonitoringMetrics(objs)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for component, names := range byComponent {
		for _, name := range names {
			family := name
			if strings.HasSuffix(name, "_bucket") {
				family = strings.TrimSuffix(name, "_bucket")
			}
			if !strings.Contains(string(doc), "`"+family+"`") {
				t.Errorf("docs/metrics.md does not list %s (read by the %s's alerts or panels)", family, component)
			}
		}
	}
}
