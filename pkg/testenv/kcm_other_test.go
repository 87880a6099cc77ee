//go:build !linux

package testenv_test

import (
	"testing"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// startOnEndingThread starts a cluster; only Linux has Pdeathsig, whose
// tie to the forking thread the Linux variant checks.
func startOnEndingThread(t *testing.T, opts ...testenv.Option) *testenv.Cluster {
	t.Helper()
	return testenv.Start(t, opts...)
}
