package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestRunExternalProvisioner runs the benchmark with Marketplane's
// inter-operator binary as -provisioner-cmd: every instance must succeed
// through that process, its writes must count as the provisioner's, the
// phases that need the in-process inter-operator must be skipped, and the
// process must be stopped when the run ends.
func TestRunExternalProvisioner(t *testing.T) {
	testenv.SkipIfShort(t)
	bin := t.TempDir()
	testenv.BuildBinaries(t, bin, "github.com/marketplane/marketplane/cmd/marketplane-interoperator")
	command := strings.Join([]string{"env", "POD_NAMESPACE=" + catalogNamespace, "POD_NAME=bench-0",
		filepath.Join(bin, "marketplane-interoperator"), "run", "--provider-name", providerName, "--environment", "bench",
		"--kubeconfig", kubeconfigPlaceholder, "--onboarding-kubeconfig", kubeconfigPlaceholder,
		"--metrics-bind-address", "0", "--verbosity", "ERROR"}, " ")
	var out bytes.Buffer
	c := config{n: 20, single: 3, workers: 4, concurrency: 4, qps: -1, burst: 100, servers: 1,
		timeout: time.Minute, settle: 500 * time.Millisecond, broker: true,
		external: externalConfig{command: command, logDir: t.TempDir(), clusterID: clusterName}}
	rep, err := run(context.Background(), c, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rep.instancesSucceeded != c.n || rep.loadPerSecond <= 0 || rep.rawPerSecond <= 0 {
		t.Errorf("figures are missing: %+v", rep)
	}
	// The finalizer, the status and the ConfigMap at least: the writes of
	// the other process count as the provisioner's, the create as the
	// benchmark's.
	if rep.provisionerWrites < 3 || rep.provisionerWrites > 8 {
		t.Errorf("provisioner writes per instance = %.2f, want between 3 and 8", rep.provisionerWrites)
	}
	if rep.benchmarkWrites < 1 {
		t.Errorf("benchmark writes per instance = %.2f, want at least 1", rep.benchmarkWrites)
	}
	if rep.broker != nil {
		t.Errorf("the broker phase ran with -provisioner-cmd: %+v", rep.broker)
	}
	for _, want := range []string{"provisioner command (pid", "KUBECONFIG=", "the broker and direct phases are skipped",
		"provisioner marketplane-interoperator (pid", "benchmark process (clients)", `spec.clusterId "target"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if p := runningProvisioner.Load(); p != nil {
		t.Errorf("the provisioner command %s is still running after the run", p.label)
	}
}

// TestExternalProvisionerExitEndsTheRun runs a provisioner command that
// exits at once: the run must end with an error naming that, not with a
// phase's timeout.
func TestExternalProvisionerExitEndsTheRun(t *testing.T) {
	testenv.SkipIfShort(t)
	var out bytes.Buffer
	c := config{n: 5, single: 2, workers: 2, concurrency: 2, qps: -1, burst: 100, servers: 1,
		timeout: 10 * time.Minute, settle: 100 * time.Millisecond,
		external: externalConfig{command: "sh -c exit", logDir: t.TempDir()}}
	_, err := run(context.Background(), c, &out)
	if err == nil || !strings.Contains(err.Error(), "the provisioner command exited") {
		t.Fatalf("run = %v, want the error that the provisioner command exited\n%s", err, out.String())
	}
}

// TestExternalFlags checks that -provisioner-cmd refuses what it cannot
// run and turns the broker phase off.
func TestExternalFlags(t *testing.T) {
	base := config{n: 1, single: 1, workers: 1, concurrency: 1, qps: -1, burst: 1, servers: 1, broker: true}
	cases := map[string]struct {
		reason  string
		args    func(*config)
		wantErr string
	}{
		"InProcess": {reason: "without a command the broker phase runs", args: func(*config) {}},
		"Command":   {reason: "a command skips the broker phase", args: func(c *config) { c.external.command = "true" }},
		"ThreeServers": {reason: "the command gets one kubeconfig",
			args: func(c *config) { c.external.command, c.servers = "true", 3 }, wantErr: "-servers 1"},
		"Clusters": {reason: "the command gets one kubeconfig",
			args: func(c *config) { c.external.command, c.clusters = "true", 3 }, wantErr: "-clusters 1"},
		"CRDsInProcess": {reason: "the in-process inter-operator needs its own CRDs",
			args: func(c *config) { c.external.crdsDir = "." }, wantErr: "-crds needs -provisioner-cmd"},
		"BlankCommand": {reason: "a blank command has no program",
			args: func(c *config) { c.external.command = "  " }, wantErr: "blank"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := base
			tc.args(&c)
			got, err := c.checked()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s: checked() error = %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: checked(): %v", tc.reason, err)
			}
			if want := c.external.command == ""; got.broker != want {
				t.Errorf("%s: broker = %t, want %t", tc.reason, got.broker, want)
			}
		})
	}
}
