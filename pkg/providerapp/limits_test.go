package providerapp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
)

// The shipped default leaves client-go without a client-side limiter;
// a QPS given on the command line still applies.
func TestRateLimitFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args        []string
		wantLimited bool
		wantQPS     float32
		wantBurst   int
	}{
		"Default":  {wantQPS: -1, wantBurst: 100},
		"Lowered":  {args: []string{"--kube-api-qps=50", "--kube-api-burst=70"}, wantLimited: true, wantQPS: 50, wantBurst: 70},
		"QPSAlone": {args: []string{"--kube-api-qps=50"}, wantLimited: true, wantQPS: 50, wantBurst: 100},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &flags{}
			fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
			f.addRateLimitFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.loadConfig(kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.QPS != tc.wantQPS || cfg.Burst != tc.wantBurst {
				t.Errorf("QPS/Burst = %g/%d, want %g/%d", cfg.QPS, cfg.Burst, tc.wantQPS, tc.wantBurst)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rl := cs.CoreV1().RESTClient().GetRateLimiter()
			if limited := rl != nil; limited != tc.wantLimited {
				t.Fatalf("client-side rate limiter present = %v, want %v", limited, tc.wantLimited)
			}
			if rl != nil && rl.QPS() != tc.wantQPS {
				t.Errorf("rate limiter QPS = %g, want %g", rl.QPS(), tc.wantQPS)
			}
		})
	}
}
