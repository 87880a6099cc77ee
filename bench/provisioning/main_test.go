package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunSmall runs the benchmark with a few instances against a real API
// server, so that it keeps working: every instance must succeed and the
// figures must come out, the write counts read from the API server's
// metrics among them. It runs with one busy loop (-load 1), which must be
// gone when the run ends. The targets are not checked: this machine is
// shared.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the benchmark against an API server; run without -short")
	}
	var out bytes.Buffer
	c := config{n: 20, single: 3, workers: 4, concurrency: 4, qps: 200, burst: 400, servers: 1,
		timeout: time.Minute, settle: 500 * time.Millisecond, broker: true, load: 1}
	rep, err := run(context.Background(), c, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	busyPIDs.Range(func(pid, _ any) bool {
		t.Errorf("busy loop %v is left after the run", pid)
		return true
	})
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
	if b := rep.broker; b == nil || b.perSecond <= 0 || b.ratio <= 0 || b.syncP50 <= 0 || b.provisionP50 <= 0 || b.bindP50 <= 0 || b.deprovisionAll <= 0 ||
		b.deprovisionWrites <= 0 || b.deprovisionReads <= 0 {
		t.Errorf("broker figures are missing: %+v", rep.broker)
	}
	if rep.apiserverCPU <= 0 {
		t.Errorf("kube-apiserver CPU per instance = %s, want a measured figure", rep.apiserverCPU)
	}
	for _, want := range []string{"idle:", "raw:", "instances/s", "create→succeeded", "sfserviceinstances/status", "configmaps", "qps=200 burst=400", "instances/s through the broker", "deprovision:", "CPU time in the deprovision", "API writes per instance (everyone's)", "reconciles per instance: instance controller", "direct: the broker phase's provision+bind without the broker", "through the broker ÷ direct", "CPU time in the direct provision+bind", "API servers in the small test profile",
		"machine load: -load 1", "busy loops (-load)", "kube-apiserver CPU per instance", "API requests during the deprovision",
		"deprovision requests per instance: writes", "all targets met:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	// Each phase's first line names the load average at its start and end.
	for _, phase := range []string{"idle:", "raw:", "load:", "broker:", "direct:"} {
		if !hasLine(out.String(), phase, "[load average (1 min) ") {
			t.Errorf("the first line of phase %q lacks the load average", phase)
		}
	}
}

// hasLine reports whether a line of s starts with prefix and contains
// substr.
func hasLine(s, prefix, substr string) bool {
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, substr) {
			return true
		}
	}
	return false
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
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(config{}, externalConfig{})); diff != "" {
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

func TestReportOK(t *testing.T) {
	// met meets every target of the single-cluster benchmark with the
	// broker phase; each case breaks one of them.
	met := func() report {
		return report{
			rawPerSecond: 1000, loadPerSecond: 200, // 0.2×
			apiserverCPU:      6 * time.Millisecond,
			provisionerWrites: 3, eventWrites: 0,
			idleP50: 10 * time.Millisecond, idleP99: 25 * time.Millisecond,
			broker: &brokerReport{
				ratio: 0.5, syncP99: 100 * time.Millisecond,
				deprovisionAll: 30 * time.Second, deprovisionWrites: 5, deprovisionReads: 3,
			},
		}
	}
	tests := map[string]struct {
		reason string
		args   func(*report)
		want   bool
	}{
		"AllMet": {
			reason: "every figure on its target is met",
			args:   func(*report) {},
			want:   true,
		},
		"NoBrokerPhase": {
			reason: "without the broker phase only the provisioner's targets count",
			args:   func(r *report) { r.broker = nil },
			want:   true,
		},
		"RawRatio": {
			reason: "the load phase must reach 0.2× the raw creates/s of the same run, not an absolute rate",
			args:   func(r *report) { r.rawPerSecond, r.loadPerSecond = 2000, 399 },
			want:   false,
		},
		"SlowMachineRatioMet": {
			reason: "a low absolute rate meets the target when the raw rate is low too",
			args:   func(r *report) { r.rawPerSecond, r.loadPerSecond = 100, 20 },
			want:   true,
		},
		"NoRawRate": {
			reason: "without a raw rate the ratio is not measured and misses",
			args:   func(r *report) { r.rawPerSecond = 0 },
			want:   false,
		},
		"APIServerCPU": {
			reason: "more than 6 ms of kube-apiserver CPU per instance misses",
			args:   func(r *report) { r.apiserverCPU = 6*time.Millisecond + time.Microsecond },
			want:   false,
		},
		"APIServerCPUNotMeasured": {
			reason: "no API server CPU at all means it was not measured",
			args:   func(r *report) { r.apiserverCPU = 0 },
			want:   false,
		},
		"WritesWithEvents": {
			reason: "events count towards the provisioner's 3 writes",
			args:   func(r *report) { r.provisionerWrites, r.eventWrites = 2.5, 0.6 },
			want:   false,
		},
		"IdleP50": {
			reason: "idle p50 above 10 ms misses",
			args:   func(r *report) { r.idleP50 = 11 * time.Millisecond },
			want:   false,
		},
		"IdleP99": {
			reason: "idle p99 above 25 ms misses",
			args:   func(r *report) { r.idleP99 = 26 * time.Millisecond },
			want:   false,
		},
		"BrokerRatio": {
			reason: "the broker must reach 0.5× the rate of the same work without it",
			args:   func(r *report) { r.broker.ratio = 0.49 },
			want:   false,
		},
		"DeprovisionTime": {
			reason: "deprovisioning all instances must take at most 30 s",
			args:   func(r *report) { r.broker.deprovisionAll = 31 * time.Second },
			want:   false,
		},
		"DeprovisionNotMeasured": {
			reason: "a deprovision that took no time did not run",
			args:   func(r *report) { r.broker.deprovisionAll = 0 },
			want:   false,
		},
		"DeprovisionWrites": {
			reason: "more than 5 writes per deprovisioned instance miss",
			args:   func(r *report) { r.broker.deprovisionWrites = 5.01 },
			want:   false,
		},
		"DeprovisionReads": {
			reason: "more than 3 reads per deprovisioned instance miss",
			args:   func(r *report) { r.broker.deprovisionReads = 3.01 },
			want:   false,
		},
		"BrokerSyncP99": {
			reason: "the broker's sync provision p99 target is kept",
			args:   func(r *report) { r.broker.syncP99 = 101 * time.Millisecond },
			want:   false,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := met()
			tc.args(&r)
			if got := r.ok(); got != tc.want {
				t.Errorf("%s: ok() = %t, want %t (report %+v, broker %+v)", tc.reason, got, tc.want, r, r.broker)
			}
		})
	}
}

func TestWithFirstLineSuffix(t *testing.T) {
	tests := map[string]struct {
		reason string
		args   string
		want   string
	}{
		"FirstLine":      {reason: "the suffix ends the first line", args: "idle: 3\n  max\n", want: "idle: 3 [x]\n  max\n"},
		"LeadingNewline": {reason: "a phase starting with an empty line gets it on its first text", args: "\nbroker: on\n  sync\n", want: "\nbroker: on [x]\n  sync\n"},
		"NoNewline":      {reason: "an unterminated line gets it at its end", args: "raw: 5", want: "raw: 5 [x]"},
		"Empty":          {reason: "a phase that printed nothing stays empty", args: "\n", want: "\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := string(withFirstLineSuffix([]byte(tc.args), " [x]"))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestBusyLoops starts two busy loops and checks that they run as
// children of this process, that their CPU time is named apart, and that
// none is left once stopped.
func TestBusyLoops(t *testing.T) {
	stop, err := startBusyLoops(2)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	busyPIDs.Range(func(k, _ any) bool { pids = append(pids, k.(int)); return true })
	if len(pids) != 2 {
		_ = stop()
		t.Fatalf("busy loops recorded: %v, want 2", pids)
	}
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			t.Errorf("busy loop %d does not run: %v", pid, err)
		}
	}
	if _, ok := cpuSeconds()[busyLoopsCPUName]; !ok {
		t.Errorf("cpuSeconds has no %q: %v", busyLoopsCPUName, cpuSeconds())
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	for _, pid := range pids {
		// Reaped by stop: the PID is gone, not a zombie.
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("busy loop %d is left after stop: %v", pid, err)
		}
	}
	if _, ok := cpuSeconds()[busyLoopsCPUName]; ok {
		t.Errorf("cpuSeconds still names busy loops after stop")
	}
}
