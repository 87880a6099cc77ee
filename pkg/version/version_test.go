package version

import (
	"io"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestResolve checks the order in which a build's information is found:
// the values stamped by the linker first, then the Go build information
// (main module version, vcs.revision with -dirty when modified, vcs.time),
// then Unknown.
func TestResolve(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/marketplane/marketplane", Version: "v0.3.1-0.20261124100000-0123456789ab"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.time", Value: "2026-11-24T10:00:00Z"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	modified := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fedcba"}, {Key: "vcs.modified", Value: "true"}}}
	cases := map[string]struct {
		reason  string
		stamped Info
		bi      *debug.BuildInfo
		want    Info
	}{
		"Stamped": {
			reason:  "values set with -ldflags -X win over the build information",
			stamped: Info{Version: "v0.2.0", Revision: "abc", BuildDate: "2026-01-02T03:04:05Z"},
			bi:      vcs,
			want:    Info{Version: "v0.2.0", Revision: "abc", BuildDate: "2026-01-02T03:04:05Z", GoVersion: "go1.99.1", Platform: platform},
		},
		"BuildInfo": {
			reason: "without stamps the main module's version and the VCS settings are used",
			bi:     vcs,
			want:   Info{Version: "v0.3.1-0.20261124100000-0123456789ab", Revision: "0123456789abcdef", BuildDate: "2026-11-24T10:00:00Z", GoVersion: "go1.99.1", Platform: platform},
		},
		"PartlyStamped": {
			reason:  "a stamped version keeps the VCS revision and time for what was not stamped",
			stamped: Info{Version: "v1.0.0"},
			bi:      vcs,
			want:    Info{Version: "v1.0.0", Revision: "0123456789abcdef", BuildDate: "2026-11-24T10:00:00Z", GoVersion: "go1.99.1", Platform: platform},
		},
		"DevelModified": {
			reason: "(devel) is no version; a modified work tree marks the revision dirty",
			bi:     modified,
			want:   Info{Version: Unknown, Revision: "fedcba-dirty", BuildDate: Unknown, GoVersion: "go1.99.1", Platform: platform},
		},
		"Nothing": {
			reason: "without stamps and build information everything is Unknown but the runtime's Go version",
			want:   Info{Version: Unknown, Revision: Unknown, BuildDate: Unknown, GoVersion: runtime.Version(), Platform: platform},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resolve(tc.stamped, tc.bi)); diff != "" {
				t.Errorf("%s\nresolve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestGetStamped checks that Get reads the variables the linker sets.
func TestGetStamped(t *testing.T) {
	defer func(v, r, d string) { Version, Revision, BuildDate = v, r, d }(Version, Revision, BuildDate)
	Version, Revision, BuildDate = "v9.8.7", "rev", "2026-11-24T00:00:00Z"
	got := Get()
	if got.Version != "v9.8.7" || got.Revision != "rev" || got.BuildDate != "2026-11-24T00:00:00Z" {
		t.Errorf("Get() = %+v; want the stamped values", got)
	}
	want := "v9.8.7 (revision rev, built 2026-11-24T00:00:00Z, " + got.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if s := got.String(); s != want {
		t.Errorf("String() = %q; want %q", s, want)
	}
	if l := Line("marketplane"); l != "marketplane "+want {
		t.Errorf("Line = %q", l)
	}
}

// TestCollector checks the gauge's name, labels and value.
func TestCollector(t *testing.T) {
	defer func(v, r, d string) { Version, Revision, BuildDate = v, r, d }(Version, Revision, BuildDate)
	Version, Revision = "v0.2.0", "abc"
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collector())
	want := `# TYPE marketplane_build_info gauge
marketplane_build_info{goversion="` + Get().GoVersion + `",revision="abc",version="v0.2.0"} 1
`
	if got := scrape(t, reg); !strings.Contains(got, want) {
		t.Errorf("/metrics lacks\n%s\ngot:\n%s", want, got)
	}
}

// scrape returns what /metrics serves from g in the text format.
func scrape(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestRegisterMetrics checks that the gauge lands in controller-runtime's
// registry, which every manager serves, and that a second call is harmless.
func TestRegisterMetrics(t *testing.T) {
	RegisterMetrics()
	RegisterMetrics()
	if n := strings.Count(scrape(t, crmetrics.Registry), "\n"+MetricName+"{"); n != 1 {
		t.Errorf("%s series in controller-runtime's registry: %d; want 1", MetricName, n)
	}
}

// TestAddFlag checks that --version prints the binary's name and the
// version line, and runs nothing else.
func TestAddFlag(t *testing.T) {
	ran := false
	cmd := &cobra.Command{Use: "marketplane-test", RunE: func(*cobra.Command, []string) error { ran = true; return nil }}
	AddFlag(cmd)
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := Line("marketplane-test") + "\n"; out.String() != want {
		t.Errorf("--version printed %q; want %q", out.String(), want)
	}
	if ran {
		t.Error("--version ran the command")
	}
}

// TestAddFlagLeavesVToVerbosity: on a command without a verbosity flag,
// -v is not --version (cobra's default would make it so): -v means the
// log verbosity on every Marketplane command.
func TestAddFlagLeavesVToVerbosity(t *testing.T) {
	cmd := &cobra.Command{Use: "marketplane-test", RunE: func(*cobra.Command, []string) error { return nil }}
	AddFlag(cmd)
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"-v"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "unknown shorthand flag: 'v'") {
		t.Errorf("-v: error %v, output %q; want it unknown, not the version", err, out.String())
	}
}
