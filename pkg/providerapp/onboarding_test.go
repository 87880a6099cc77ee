package providerapp_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/providerapp"
)

// TestOnboardingIsPlatformExcludesKubeconfig checks that the flag that
// makes the platform the onboarding cluster cannot be combined with an
// onboarding kubeconfig: one of them would be silently ignored.
func TestOnboardingIsPlatformExcludesKubeconfig(t *testing.T) {
	for _, sub := range []string{"init", "run"} {
		cmd := providerapp.Provider{Name: "widgets"}.Command()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{sub, "--environment", "test", "--provider-name", "widgets",
			"--" + providerapp.FlagOnboardingIsPlatform, "--onboarding-kubeconfig", "/dev/null"})
		err := cmd.ExecuteContext(t.Context())
		if err == nil || !strings.Contains(err.Error(), "exclude each other") {
			t.Errorf("%s with both onboarding flags: error %v, want that they exclude each other", sub, err)
		}
	}
}
