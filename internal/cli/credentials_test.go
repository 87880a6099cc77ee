package cli

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestKubeconfigFromCredentials(t *testing.T) {
	cases := map[string]struct {
		in      string
		wantErr string
	}{
		"BindResponse":    {in: `{"credentials":{"apiServer":"https://127.0.0.1:6443","caData":"Y2E=","token":"t0k","namespace":"sf-1"}}`},
		"CredentialsOnly": {in: `{"apiServer":"https://127.0.0.1:6443","caData":"Y2E=","token":"t0k","namespace":"sf-1"}`},
		"NoToken":         {in: `{"credentials":{"apiServer":"https://x"}}`, wantErr: "want apiServer and token"},
		"BadCA":           {in: `{"apiServer":"https://x","token":"t","caData":"!!"}`, wantErr: "caData is not base64"},
		"NotJSON":         {in: `hello`, wantErr: "standard input is not a JSON bind response"},
		"Empty":           {in: ``, wantErr: "standard input is empty; pipe in an OSB bind response"},
		"Kubeconfig":      {in: `{"credentials":{"kubeconfig":"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: Y2E=\nusers:\n- name: u\n  user:\n    token: t0k\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"}}`},
		"BadKubeconfig":   {in: `{"credentials":{"kubeconfig":"clusters: ["}}`, wantErr: "read credentials: kubeconfig"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := kubeconfigFromCredentials(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.RESTConfigFromKubeConfig(out)
			if err != nil {
				t.Fatalf("output is not a kubeconfig: %v", err)
			}
			if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "t0k" || string(cfg.CAData) != "ca" {
				t.Errorf("kubeconfig = host %q token %q ca %q", cfg.Host, cfg.BearerToken, cfg.CAData)
			}
		})
	}
}
