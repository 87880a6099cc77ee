package kcpprovider_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/internal/kcpprovider"
	"github.com/marketplane/marketplane/pkg/kubeconfig"
)

// runCommand runs the provider's command with args and returns its error
// and what it wrote.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := kcpprovider.Command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

var contractArgs = []string{"--environment=test", "--provider-name=kcp", "--verbosity=ERROR"}

// TestInitNeedsKCPKubeconfig: init without --kcp-kubeconfig and
// $KCP_KUBECONFIG fails, naming both; with an unreadable file or a
// credential plugin it fails too.
func TestInitNeedsKCPKubeconfig(t *testing.T) {
	plugin := filepath.Join(t.TempDir(), "plugin.kubeconfig")
	if err := os.WriteFile(plugin, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true}}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		env     string
		args    []string
		wantErr []string
	}{
		"Missing":       {wantErr: []string{"--kcp-kubeconfig", "$KCP_KUBECONFIG"}},
		"Unreadable":    {args: []string{"--kcp-kubeconfig=/nonexistent/kcp.kubeconfig"}, wantErr: []string{"--kcp-kubeconfig", "no such file"}},
		"EnvUnreadable": {env: "/nonexistent/env.kubeconfig", wantErr: []string{"$KCP_KUBECONFIG", "/nonexistent/env.kubeconfig"}},
		"Plugin":        {args: []string{"--kcp-kubeconfig=" + plugin}, wantErr: []string{kubeconfig.ErrPlugin.Error()}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv(kcpprovider.EnvKCPKubeconfig, tc.env)
			out, err := runCommand(t, append(append([]string{"init"}, contractArgs...), tc.args...)...)
			if err == nil {
				t.Fatalf("init: want an error, got none; output:\n%s", out)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("init error %q: want it to contain %q", err, want)
				}
			}
		})
	}
}

// TestInitReachesKCP: init with kcp's admin kubeconfig, from the
// environment, succeeds.
func TestInitReachesKCP(t *testing.T) {
	startEnv(t)
	t.Setenv(kcpprovider.EnvKCPKubeconfig, kcp.KubeconfigPath)
	if out, err := runCommand(t, append([]string{"init"}, contractArgs...)...); err != nil {
		t.Fatalf("init: %v; output:\n%s", err, out)
	}
}
