package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// unreachableKubeconfig points at a port nothing listens on.
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: nowhere
  context:
    cluster: nowhere
    user: nobody
current-context: nowhere
users:
- name: nobody
  user:
    token: not-a-real-token
`

// TestInitFailsWithNonZeroExit builds the binary and runs init the way the
// operator's init Job does. When it cannot install its CRDs it must exit
// non-zero, so that the Job fails and the operator reports it, instead of
// the provider starting without its API.
func TestInitFailsWithNonZeroExit(t *testing.T) {
	dir := t.TempDir()
	// Skipped under -short: a build takes seconds at best.
	testenv.BuildBinaries(t, dir, ".")
	bin := filepath.Join(dir, "sample")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(unreachableKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"init", "--environment=test", "--provider-name=sample", "--kubeconfig=" + kubeconfig}

	cases := map[string]struct {
		env     []string
		wantErr string
	}{
		"unreachable platform cluster": {
			env:     []string{"POD_NAMESPACE=sp-sample"},
			wantErr: "install platform CRDs",
		},
		"no POD_NAMESPACE": {
			wantErr: "POD_NAMESPACE",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, tc.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("init: want a non-zero exit, got %v; stderr:\n%s", err, stderr.String())
			}
			if exit.ExitCode() == 0 {
				t.Fatalf("init exited 0")
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr does not mention %q:\n%s", tc.wantErr, stderr.String())
			}
		})
	}
}
