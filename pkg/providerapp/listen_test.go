package providerapp_test

import (
	"testing"

	"github.com/marketplane/marketplane/pkg/metricsauth"
	"github.com/marketplane/marketplane/pkg/providerapp"
)

// TestRunListenDefaults checks that a provider's run serves metrics on
// loopback unless the operator exposes them, that exposed metrics are
// secure by default, and that the health probes are off by default.
func TestRunListenDefaults(t *testing.T) {
	run, _, err := providerapp.Provider{Name: "probe"}.Command().Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	f := run.Flags()
	if def := f.Lookup("metrics-bind-address").DefValue; !metricsauth.IsLoopback(def) {
		t.Errorf("--metrics-bind-address defaults to %q; want a loopback address", def)
	}
	if def := f.Lookup("metrics-secure").DefValue; def != "true" {
		t.Errorf("--metrics-secure defaults to %s; want true", def)
	}
	if def := f.Lookup("health-probe-bind-address").DefValue; def != "0" && !metricsauth.IsLoopback(def) {
		t.Errorf("--health-probe-bind-address defaults to %q; want off or a loopback address", def)
	}
}
