package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunSmall runs the benchmark with a few instances against a real API
// server, so that it keeps working: every instance must succeed and the
// figures must come out, the write counts read from the API server's
// metrics among them. The targets are not checked: this machine is shared.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the benchmark against an API server; run without -short")
	}
	var out bytes.Buffer
	c := config{n: 20, single: 3, workers: 4, concurrency: 4, qps: 200, burst: 400, servers: 1,
		timeout: time.Minute, settle: 500 * time.Millisecond, broker: true}
	rep, err := run(context.Background(), c, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rep.instancesSucceeded != c.n || rep.loadPerSecond <= 0 || rep.rawPerSecond <= 0 || rep.idleP50 <= 0 || rep.loadP99 < rep.loadP50 {
		t.Errorf("figures are missing: %+v", rep)
	}
	// At least the finalizer, the status and the ConfigMap; at most a few
	// retries more. Zero would mean the metrics were not read.
	if rep.provisionerWrites < 3 || rep.provisionerWrites > 8 {
		t.Errorf("provisioner writes per instance = %.2f, want between 3 and 8", rep.provisionerWrites)
	}
	// The broker's create, counted by the transport.
	if rep.benchmarkWrites < 1 {
		t.Errorf("benchmark writes per instance = %.2f, want at least 1", rep.benchmarkWrites)
	}
	// The broker phase: every figure comes out of real OSB requests.
	if b := rep.broker; b == nil || b.perSecond <= 0 || b.ratio <= 0 || b.syncP50 <= 0 || b.provisionP50 <= 0 || b.bindP50 <= 0 || b.deprovisionAll <= 0 {
		t.Errorf("broker figures are missing: %+v", rep.broker)
	}
	for _, want := range []string{"idle:", "raw:", "instances/s", "create→succeeded", "sfserviceinstances/status", "configmaps", "qps=200 burst=400", "instances/s through the broker", "deprovision:", "CPU time in the deprovision", "API writes per instance (everyone's)", "reconciles per instance: instance controller", "direct: the broker phase's provision+bind without the broker", "through the broker ÷ direct", "CPU time in the direct provision+bind", "API servers in the small test profile"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

// TestRunMultiCluster runs the multi-cluster mode with a few instances
// against a platform and three workload API servers, five SFClusters
// registered round-robin on them: every instance must succeed, least-filled
// must place them evenly on the five SFClusters (none on the single-cluster
// one, which holds only the idle phase's three instances and would take
// some if it were not cordoned), their ConfigMaps must be on the workload
// servers the SFClusters point at, and the figures must come out. The
// targets are not checked: this machine is shared.
func TestRunMultiCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the benchmark against four API servers; run without -short")
	}
	var out bytes.Buffer
	c := config{n: 30, single: 2, workers: 4, concurrency: 4, qps: 200, burst: 400, servers: 1,
		timeout: 2 * time.Minute, settle: 500 * time.Millisecond,
		clusters: 3, registered: 5}
	rep, err := run(context.Background(), c, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	m := rep.multi
	if m == nil {
		t.Fatal("the report has no multi-cluster figures")
	}
	if rep.instancesSucceeded != c.n || rep.loadPerSecond <= 0 || rep.rawPerSecond <= 0 || rep.loadP99 < rep.loadP50 {
		t.Errorf("figures are missing: %+v", rep)
	}
	// 30 instances over 5 SFClusters: 6 each; clusters 1 and 4 are on
	// workload-1, 2 and 5 on workload-2, 3 on workload-3.
	wantPlacements := map[string]int{"cluster-01": 6, "cluster-02": 6, "cluster-03": 6, "cluster-04": 6, "cluster-05": 6}
	if diff := cmp.Diff(wantPlacements, m.placements); diff != "" {
		t.Errorf("placements of the load phase by spec.clusterId, -want +got:\n%s", diff)
	}
	if m.spread != 0 {
		t.Errorf("placements max-min = %d, want 0", m.spread)
	}
	wantObjects := map[string]int{"workload-1": 12, "workload-2": 12, "workload-3": 6}
	if diff := cmp.Diff(wantObjects, m.serverObjects); diff != "" {
		t.Errorf("ConfigMaps of the load phase on the workload servers, -want +got:\n%s", diff)
	}
	if m.peakRSS == 0 || m.rss == 0 || m.rss > m.peakRSS {
		t.Errorf("resident set sizes: peak %d, now %d; want both positive, now ≤ peak", m.peakRSS, m.rss)
	}
	if m.singlePerSecond != 0 {
		t.Errorf("single-cluster rate = %.1f without -compare-single, want none", m.singlePerSecond)
	}
	// The workload servers' writes are counted: each got its ConfigMaps.
	for _, want := range []string{"load, 5 SFClusters on 3 workload API servers, least-filled", "placements max-min: 0",
		"multi ÷ single cluster: not measured", "peak RSS", "workload-3 configmaps", "not checked)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

// TestRunMultiClusterCompareSingle runs the single-cluster load phase
// before the multi-cluster one (-compare-single) and checks that both
// rates, and their ratio, come out.
func TestRunMultiClusterCompareSingle(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the benchmark against three API servers; run without -short")
	}
	var out bytes.Buffer
	c := config{n: 20, single: 1, workers: 4, concurrency: 4, qps: 200, burst: 400, servers: 1,
		timeout: 2 * time.Minute, settle: 500 * time.Millisecond,
		clusters: 2, compareSingle: true}
	rep, err := run(context.Background(), c, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	m := rep.multi
	if m == nil || m.singlePerSecond <= 0 || rep.loadPerSecond <= 0 {
		t.Fatalf("the single- and multi-cluster rates are missing: %+v", rep)
	}
	if diff := cmp.Diff(map[string]int{"cluster-01": 10, "cluster-02": 10}, m.placements); diff != "" {
		t.Errorf("placements of the load phase by spec.clusterId, -want +got:\n%s", diff)
	}
	for _, want := range []string{"load, single cluster (SFCluster target)", "load, 2 SFClusters on 2 workload API servers, least-filled",
		"multi ÷ single cluster (same run, same -n)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

func TestMultiClusterFlags(t *testing.T) {
	tests := map[string]struct {
		reason  string
		args    config
		want    config
		wantErr string
	}{
		"SingleCluster": {
			reason: "-clusters 1 is the single-cluster benchmark, unchanged",
			args:   config{clusters: 1},
			want:   config{clusters: 1},
		},
		"Defaults": {
			reason: "several clusters default to least-filled and one SFCluster per server",
			args:   config{clusters: 3},
			want:   config{clusters: 3, registered: 3, scheduler: "least-filled"},
		},
		"Registered": {
			reason: "-registered and -scheduler are kept",
			args:   config{clusters: 3, registered: 20, scheduler: "round-robin"},
			want:   config{clusters: 3, registered: 20, scheduler: "round-robin"},
		},
		"FewerRegistered": {
			reason:  "every workload server needs an SFCluster",
			args:    config{clusters: 3, registered: 2},
			wantErr: "-registered (2) must be at least -clusters (3)",
		},
		"UnknownScheduler": {
			reason:  "the scheduler must be one the ProviderConfig accepts",
			args:    config{clusters: 3, scheduler: "fastest"},
			wantErr: `unknown scheduler type "fastest"`,
		},
		"DefaultScheduler": {
			reason:  "the default scheduler refuses several clusters without a default one",
			args:    config{clusters: 3, scheduler: "default"},
			wantErr: "-scheduler default",
		},
		"CompareSingleAlone": {
			reason:  "-compare-single has nothing to compare with one cluster",
			args:    config{clusters: 1, compareSingle: true},
			wantErr: "need -clusters above 1",
		},
		"ZeroClusters": {
			reason: "the zero value is the single-cluster benchmark",
			args:   config{},
			want:   config{clusters: 1},
		},
		"NegativeClusters": {
			reason:  "at least one cluster",
			args:    config{clusters: -1},
			wantErr: "-clusters must be at least 1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.args.withMultiClusterDefaults()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s: error = %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(config{})); diff != "" {
				t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMemory(t *testing.T) {
	peak, current, err := memory()
	if err != nil {
		t.Fatal(err)
	}
	// A Go test binary holds at least a megabyte, and no process more at
	// its peak than now.
	if current < 1<<20 || peak < current {
		t.Errorf("memory() = peak %d, now %d; want now ≥ 1 MiB and peak ≥ now", peak, current)
	}
}

func TestResourceOf(t *testing.T) {
	tests := map[string]struct {
		path, want string
	}{
		"CoreNamespaced":     {"/api/v1/namespaces/ns/configmaps", "configmaps"},
		"CoreNamed":          {"/api/v1/namespaces/ns/configmaps/cm", "configmaps"},
		"Namespace":          {"/api/v1/namespaces/ns", "namespaces"},
		"Namespaces":         {"/api/v1/namespaces", "namespaces"},
		"GroupSubresource":   {"/apis/osb.servicefabrik.io/v1alpha1/namespaces/ns/sfserviceinstances/i/status", "sfserviceinstances/status"},
		"GroupCollection":    {"/apis/osb.servicefabrik.io/v1alpha1/namespaces/ns/sfserviceinstances", "sfserviceinstances"},
		"ClusterScopedNamed": {"/apis/interoperator.servicefabrik.io/v1alpha1/providerconfigs/p", "providerconfigs"},
		"Events":             {"/apis/events.k8s.io/v1/namespaces/ns/events", "events"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := resourceOf(tc.path); got != tc.want {
				t.Errorf("resourceOf(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestParseLabels(t *testing.T) {
	got := parseLabels(`code="409",component="apiserver",group="",resource="sfserviceinstances",subresource="status",verb="PATCH",x="a\"b,c"`)
	want := map[string]string{"code": "409", "component": "apiserver", "group": "", "resource": "sfserviceinstances",
		"subresource": "status", "verb": "PATCH", "x": `a"b,c`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseLabels, -want +got:\n%s", diff)
	}
}
