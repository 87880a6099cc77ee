package crds_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/pkg/testenv"

	samplecrds "github.com/marketplane/marketplane/providers/sample/api/crds"
)

// The tests of this package that need an API server share one: starting it
// takes seconds, and the tests do not get in each other's way (each uses its
// own namespaces, and the duration test only sends dry-run requests). It
// serves every CRD of api/crds and the sample provider's, which the duration
// test checks as well. It starts on first use, so that a run of the pure unit
// tests alone starts nothing, and TestMain stops it.
var (
	sharedOnce    sync.Once
	sharedCluster *testenv.Cluster
	sharedErr     error
)

// TestMain stops the shared API server after the tests ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCluster != nil {
		if err := sharedCluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop the shared API server: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// apiServer returns the package's shared API server, starting it on first
// use. It skips t under `go test -short`, and fails t when the server cannot
// start.
func apiServer(t *testing.T) *testenv.Cluster {
	t.Helper()
	testenv.SkipIfShort(t)
	sharedOnce.Do(func() {
		var all []*apiextensionsv1.CustomResourceDefinition
		if all, sharedErr = servedCRDs(); sharedErr == nil {
			sharedCluster, sharedErr = testenv.New(testenv.WithName("crds"), testenv.WithCRDs(all...))
		}
	})
	if sharedErr != nil {
		t.Fatalf("start the shared API server: %v", sharedErr)
	}
	return sharedCluster
}

// servedCRDs returns every CRD of api/crds followed by the sample
// provider's.
func servedCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	sample, err := samplecrds.CRDs()
	if err != nil {
		return nil, fmt.Errorf("sample provider CRDs: %w", err)
	}
	return append(all, sample...), nil
}
