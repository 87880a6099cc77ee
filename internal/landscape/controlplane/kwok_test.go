package controlplane

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFindBinariesWorkloads checks that the binaries of the simulated
// workloads are required: a directory without kube-scheduler, kwok or
// kwok's stages is refused, naming what is missing and `make tools`.
func TestFindBinariesWorkloads(t *testing.T) {
	all := []string{EtcdBinary, APIServerBinary, ControllerManagerBinary, SchedulerBinary, KwokBinary, KwokStagesFile}
	for _, missing := range []string{SchedulerBinary, KwokBinary, KwokStagesFile} {
		t.Run("without "+missing, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range all {
				if name != missing {
					must(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
				}
			}
			_, err := FindBinaries(dir)
			if !errors.Is(err, ErrBinaryMissing) || !strings.Contains(err.Error(), "make tools") || !strings.Contains(err.Error(), missing) {
				t.Errorf("FindBinaries without %s = %v; want ErrBinaryMissing naming %s and make tools", missing, err, missing)
			}
		})
	}
	dir := t.TempDir()
	for _, name := range all {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
	}
	b, err := FindBinaries(dir)
	if err != nil || b.Kwok != filepath.Join(dir, KwokBinary) || b.KwokStages != filepath.Join(dir, KwokStagesFile) || b.Scheduler != filepath.Join(dir, SchedulerBinary) {
		t.Errorf("FindBinaries with every binary = %+v, %v; want the scheduler, kwok and its stages found", b, err)
	}
}

// TestWorkloadControllers checks that only a cluster that runs workloads
// gets the controllers of Deployments and nodes.
func TestWorkloadControllers(t *testing.T) {
	c := New(Layout{Dir: t.TempDir()}, Binaries{}, NewStore(t.TempDir(), &State{}), WithWorkloads("workload"))
	defer c.Close()
	got := c.controllers("workload")
	for _, want := range append(slices.Clone(Controllers), "deployment", "replicaset", "nodelifecycle") {
		if !slices.Contains(got, want) {
			t.Errorf("controllers of the workload cluster %v lack %s", got, want)
		}
	}
	if other := c.controllers("platform"); !slices.Equal(other, Controllers) {
		t.Errorf("controllers of a cluster without workloads = %v; want %v", other, Controllers)
	}
}
