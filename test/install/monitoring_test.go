package install

import (
	"bufio"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/charts"
)

// checkChartMetrics checks that body, a scrape of component's /metrics,
// has a series of every metric that the chart's PrometheusRule and Grafana
// dashboard read from component (charts.MonitoringMetrics): an alert or a
// panel on a metric the component does not export would never fire or
// show anything.
func checkChartMetrics(t *testing.T, component, body string) {
	t.Helper()
	objs, err := charts.Render(charts.WithExampleRegistry(charts.MonitoringValues()))
	if err != nil {
		t.Fatalf("render the chart with its alerts and dashboard: %v", err)
	}
	byComponent, err := charts.MonitoringMetrics(objs)
	if err != nil {
		t.Fatal(err)
	}
	want := byComponent[component]
	if len(want) == 0 {
		t.Fatalf("the chart's alerts and dashboard read no metric of the %s", component)
	}
	t.Logf("the chart's alerts and dashboard read %d metrics from the %s: %s", len(want), component, strings.Join(want, ", "))
	served := seriesNames(body)
	for _, name := range want {
		if !served[name] {
			t.Errorf("the chart's alerts or dashboard read %s, but the %s's /metrics has no such series (%d series names served)", name, component, len(served))
		}
	}
}

// seriesNames returns the names of the samples of a scrape in Prometheus'
// text format (a histogram's as name_bucket, name_sum and name_count). A
// family without series, whose HELP and TYPE lines alone are served, is not
// among them.
func seriesNames(body string) map[string]bool {
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}
