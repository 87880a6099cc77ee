package app

import (
	"testing"

	"github.com/marketplane/marketplane/pkg/metricsauth"
)

// TestRunListenDefaults checks that the operator's metrics and probes
// listen on loopback unless told otherwise, and that exposed metrics are
// secure by default.
func TestRunListenDefaults(t *testing.T) {
	run, _, err := NewCommand().Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	f := run.Flags()
	for _, name := range []string{"metrics-bind-address", "health-probe-bind-address"} {
		if def := f.Lookup(name).DefValue; !metricsauth.IsLoopback(def) {
			t.Errorf("--%s defaults to %q; want a loopback address", name, def)
		}
	}
	if def := f.Lookup("metrics-secure").DefValue; def != "true" {
		t.Errorf("--metrics-secure defaults to %s; want true", def)
	}
}
