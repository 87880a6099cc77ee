package process

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketplane/marketplane/internal/operator/deploy"
)

func TestRunArgs(t *testing.T) {
	base := deploy.Workload{
		RunCommand: []string{"run"},
		Args:       []string{"--environment=e", "--provider-name=p", "--verbosity=INFO"},
	}
	cases := map[string]struct {
		reason  string
		runArgs []string
		metrics deploy.Metrics
		replica int
		want    []string
	}{
		"NoMetrics": {
			reason:  "without metrics the endpoint is switched off, so that local providers do not share the default port",
			runArgs: []string{"--leader-elect=true"},
			replica: 1,
			want:    []string{"run", "--environment=e", "--provider-name=p", "--verbosity=INFO", "--leader-elect=true", "--metrics-bind-address=0"},
		},
		"FirstReplica": {
			reason:  "replica 0 gets the configured port, on loopback only",
			runArgs: []string{"--leader-elect=true", "--metrics-bind-address=:8080"},
			metrics: deploy.Metrics{Enabled: true, Port: 8080},
			want:    []string{"run", "--environment=e", "--provider-name=p", "--verbosity=INFO", "--leader-elect=true", "--metrics-bind-address=127.0.0.1:8080"},
		},
		"Unspecified": {
			reason:  "all interfaces become loopback: a local process is not scraped from outside",
			runArgs: []string{"--metrics-bind-address=0.0.0.0:8080"},
			metrics: deploy.Metrics{Enabled: true, Port: 8080},
			want:    []string{"run", "--environment=e", "--provider-name=p", "--verbosity=INFO", "--metrics-bind-address=127.0.0.1:8080"},
		},
		"ThirdReplica": {
			reason:  "replica i gets port+i, host kept",
			runArgs: []string{"--metrics-bind-address=127.0.0.1:9000"},
			metrics: deploy.Metrics{Enabled: true, Port: 9000},
			replica: 2,
			want:    []string{"run", "--environment=e", "--provider-name=p", "--verbosity=INFO", "--metrics-bind-address=127.0.0.1:9002"},
		},
		"NotHostPort": {
			reason:  "an address that is not host:port (\"0\" disables metrics) is left alone",
			runArgs: []string{"--metrics-bind-address=0"},
			metrics: deploy.Metrics{Enabled: true, Port: 8080},
			replica: 1,
			want:    []string{"run", "--environment=e", "--provider-name=p", "--verbosity=INFO", "--metrics-bind-address=0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := base
			w.RunArgs, w.Metrics = tc.runArgs, tc.metrics
			if diff := cmp.Diff(tc.want, runArgs(&w, tc.replica)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if tc.runArgs != nil && len(w.RunArgs) > 0 && w.RunArgs[len(w.RunArgs)-1] != tc.runArgs[len(tc.runArgs)-1] {
				t.Errorf("runArgs modified the workload's RunArgs")
			}
		})
	}
}

func TestDefaultRestartBackoff(t *testing.T) {
	got := []string{}
	for _, n := range []int32{1, 2, 3, 9, 10, 100} {
		got = append(got, DefaultRestartBackoff(n).String())
	}
	want := []string{"1s", "2s", "4s", "4m16s", "5m0s", "5m0s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff for restarts 1,2,3,9,10,100 (-want +got):\n%s", diff)
	}
}
