package providertest_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// The landscape's controllers log to their own (discarding) logger;
	// this silences controller-runtime's warning that no logger was set.
	logf.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
