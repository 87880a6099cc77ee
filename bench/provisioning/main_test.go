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
		timeout: time.Minute, settle: 500 * time.Millisecond}
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
	// The broker's create and status write, counted by the transport.
	if rep.benchmarkWrites < 2 {
		t.Errorf("benchmark writes per instance = %.2f, want at least 2", rep.benchmarkWrites)
	}
	for _, want := range []string{"idle:", "raw:", "instances/s", "create→succeeded", "sfserviceinstances/status", "configmaps", "qps=200 burst=400"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
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
