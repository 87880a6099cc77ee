package process

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketplane/marketplane/internal/operator/deploy"
)

func TestRunArgs(t *testing.T) {
	base := deploy.Workload{
		RunCommand: []string{"run"},
		Args:       []string{"--environment=e", "--provider-name=p", "--verbosity=INFO"},
	}
	contract := []string{"run", "--environment=e", "--provider-name=p", "--verbosity=INFO"}
	cases := map[string]struct {
		reason     string
		runCommand []string
		runArgs    []string
		metrics    deploy.Metrics
		want       []string
	}{
		"NoMetrics": {
			reason:  "without metrics the endpoint is switched off, so that local providers do not share the default port; a health probe address is added",
			runArgs: []string{"--leader-elect=true"},
			want:    append(slices.Clone(contract), "--leader-elect=true", "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0"),
		},
		"Metrics": {
			reason:  "the contract's metrics address is kept for assignListenAddresses",
			runArgs: []string{"--metrics-bind-address=:8080"},
			metrics: deploy.Metrics{Enabled: true, Port: 8080},
			want:    append(slices.Clone(contract), "--metrics-bind-address=:8080", "--health-probe-bind-address=127.0.0.1:0"),
		},
		"ProbeInRunCommand": {
			reason:     "a health probe address in the spec's runCommand is not added twice",
			runCommand: []string{"run", "--health-probe-bind-address", ":9440"},
			metrics:    deploy.Metrics{Enabled: true},
			want:       []string{"run", "--health-probe-bind-address", ":9440", "--environment=e", "--provider-name=p", "--verbosity=INFO"},
		},
		"ProbeOffInRunCommand": {
			reason:     "a provider may switch the probe off, in the Go flag package's single-dash form too",
			runCommand: []string{"run", "-health-probe-bind-address=0"},
			metrics:    deploy.Metrics{Enabled: true},
			want:       []string{"run", "-health-probe-bind-address=0", "--environment=e", "--provider-name=p", "--verbosity=INFO"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := base
			if tc.runCommand != nil {
				w.RunCommand = tc.runCommand
			}
			w.RunArgs, w.Metrics = tc.runArgs, tc.metrics
			if diff := cmp.Diff(tc.want, runArgs(&w)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if tc.runArgs != nil && len(w.RunArgs) > 0 && w.RunArgs[len(w.RunArgs)-1] != tc.runArgs[len(tc.runArgs)-1] {
				t.Errorf("runArgs modified the workload's RunArgs")
			}
		})
	}
}

func TestAssignListenAddresses(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		want   []string
		eps    []endpoint
	}{
		"AllFlags": {
			reason: "every listen flag with host:port gets its own free port on loopback, whatever host it asked for",
			args:   []string{"run", "--metrics-bind-address=:8080", "--health-probe-bind-address=0.0.0.0:8081", "--pprof-bind-address=10.0.0.1:6060", "--leader-elect=true"},
			want:   []string{"run", "--metrics-bind-address=127.0.0.1:40000", "--health-probe-bind-address=127.0.0.1:40001", "--pprof-bind-address=127.0.0.1:40002", "--leader-elect=true"},
			eps:    []endpoint{{"metrics", "127.0.0.1:40000"}, {"health probe", "127.0.0.1:40001"}, {"pprof", "127.0.0.1:40002"}},
		},
		"Off": {
			reason: "values that are not host:port switch an endpoint off and stay",
			args:   []string{"run", "--metrics-bind-address=0", "--pprof-bind-address=", "--health-probe-bind-address=127.0.0.1:0"},
			want:   []string{"run", "--metrics-bind-address=0", "--pprof-bind-address=", "--health-probe-bind-address=127.0.0.1:40000"},
			eps:    []endpoint{{"health probe", "127.0.0.1:40000"}},
		},
		"SeparateValueAndSingleDash": {
			reason: "the forms \"--flag value\" and \"-flag=value\" are rewritten too",
			args:   []string{"run", "--health-probe-bind-address", ":8081", "-metrics-bind-address=localhost:8080"},
			want:   []string{"run", "--health-probe-bind-address", "127.0.0.1:40000", "-metrics-bind-address=127.0.0.1:40001"},
			eps:    []endpoint{{"metrics", "127.0.0.1:40001"}, {"health probe", "127.0.0.1:40000"}},
		},
		"Repeated": {
			reason: "a flag given twice (runCommand and contract) gets one address, so the published one is the one in use",
			args:   []string{"run", "--metrics-bind-address=:9090", "--metrics-bind-address=:8080"},
			want:   []string{"run", "--metrics-bind-address=127.0.0.1:40000", "--metrics-bind-address=127.0.0.1:40000"},
			eps:    []endpoint{{"metrics", "127.0.0.1:40000"}},
		},
		"OtherFlags": {
			reason: "flags that only look alike are not touched",
			args:   []string{"run", "--metrics-bind-address-extra=:1", "--webhook-port=9443"},
			want:   []string{"run", "--metrics-bind-address-extra=:1", "--webhook-port=9443"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Ports in the order of the arguments; the order of eps is
			// that of listenFlags.
			next := 40000
			free := func() (int, error) { next++; return next - 1, nil }
			in := slices.Clone(tc.args)
			got, eps, err := assignListenAddresses(in, free)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: args (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.eps, eps, cmp.AllowUnexported(endpoint{})); diff != "" {
				t.Errorf("%s: endpoints (-want +got):\n%s", tc.reason, diff)
			}
			if !slices.Equal(in, tc.args) {
				t.Errorf("assignListenAddresses modified its input")
			}
		})
	}
}

func TestPortPool(t *testing.T) {
	var p portPool
	seen := map[int]bool{}
	var eps []endpoint
	for range 20 {
		port, err := p.get()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice while not released", port)
		}
		seen[port] = true
		eps = append(eps, endpoint{"x", net.JoinHostPort(loopbackHost, strconv.Itoa(port))})
		// The port must really be free to listen on.
		l, err := net.Listen("tcp", eps[len(eps)-1].addr)
		if err != nil {
			t.Fatalf("port %d from the pool is not free: %v", port, err)
		}
		_ = l.Close()
	}
	p.release(eps)
	if len(p.taken) != 0 {
		t.Errorf("after release %d ports are still taken", len(p.taken))
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
