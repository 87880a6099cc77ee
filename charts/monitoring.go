package charts

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DashboardKey is the key of the dashboard JSON in the chart's dashboard
// ConfigMap.
const DashboardKey = "marketplane.json"

// MonitoringValues are values that turn on the chart's PrometheusRule and
// Grafana dashboard.
func MonitoringValues() map[string]any {
	return map[string]any{"metrics": map[string]any{
		"prometheusRule": map[string]any{"enabled": true},
		"dashboard":      map[string]any{"enabled": true},
	}}
}

// MonitoringMetrics returns, by component (operator, broker,
// interoperator), the names of the metrics that the rendered chart's
// PrometheusRule expressions and Grafana dashboard targets read. An alert's
// component is its label component; a panel's is the title of the row it is
// in ("Inter-operator" is interoperator). Histograms are named by the
// series the expressions read (name_bucket, name_sum, name_count).
func MonitoringMetrics(objs []*unstructured.Unstructured) (map[string][]string, error) {
	out := map[string][]string{}
	add := func(component, expr string) {
		for _, m := range MetricNames(expr) {
			if !slices.Contains(out[component], m) {
				out[component] = append(out[component], m)
			}
		}
	}
	var rules, dashboards int
	for _, o := range objs {
		switch {
		case o.GetKind() == "PrometheusRule":
			rules++
			if err := ruleMetrics(o, add); err != nil {
				return nil, err
			}
		case o.GetKind() == "ConfigMap" && o.GetLabels()["grafana_dashboard"] != "":
			dashboards++
			data, _, _ := unstructured.NestedString(o.Object, "data", DashboardKey)
			if err := dashboardMetrics(data, add); err != nil {
				return nil, fmt.Errorf("ConfigMap %s: %w", o.GetName(), err)
			}
		}
	}
	if rules == 0 || dashboards == 0 {
		return nil, fmt.Errorf("the render has %d PrometheusRules and %d dashboard ConfigMaps, want both", rules, dashboards)
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out, nil
}

// ruleMetrics passes each alert's component and expression to add.
func ruleMetrics(o *unstructured.Unstructured, add func(component, expr string)) error {
	groups, _, err := unstructured.NestedSlice(o.Object, "spec", "groups")
	if err != nil {
		return fmt.Errorf("PrometheusRule %s: %w", o.GetName(), err)
	}
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			expr, _, _ := unstructured.NestedString(rule, "expr")
			component, _, _ := unstructured.NestedString(rule, "labels", "component")
			if expr == "" || component == "" {
				return fmt.Errorf("PrometheusRule %s: rule %v has no expr or no label component", o.GetName(), rule["alert"])
			}
			add(component, expr)
		}
	}
	return nil
}

// dashboard is the part of a Grafana dashboard MonitoringMetrics reads.
type dashboard struct {
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// dashboardMetrics passes each panel target's expression to add, with the
// component its row names.
func dashboardMetrics(data string, add func(component, expr string)) error {
	var d dashboard
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		return fmt.Errorf("parse dashboard: %w", err)
	}
	component := ""
	for _, p := range d.Panels {
		if p.Type == "row" {
			component = strings.ReplaceAll(strings.ToLower(p.Title), "-", "")
			continue
		}
		if component == "" {
			return fmt.Errorf("panel %q is in no row", p.Title)
		}
		for _, t := range p.Targets {
			if t.Expr == "" {
				return fmt.Errorf("panel %q has a target without expr", p.Title)
			}
			add(component, t.Expr)
		}
	}
	return nil
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// promKeywords are PromQL's words that are not metric names.
var promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
	"group_left", "group_right", "inf", "nan"}

// MetricNames returns the metric names a PromQL expression reads: what is
// left of it after string literals, label matchers, ranges and grouping
// lists are removed, and that is neither a function, a keyword nor part of
// a number.
func MetricNames(expr string) []string {
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(s[loc[0]-1:loc[0]], "0123456789.") {
			continue // an exponent or a unit of a number
		}
		if rest := strings.TrimSpace(s[loc[1]:]); strings.HasPrefix(rest, "(") {
			continue // a function
		}
		if slices.Contains(promKeywords, strings.ToLower(name)) || slices.Contains(names, name) {
			continue
		}
		names = append(names, name)
	}
	return names
}
