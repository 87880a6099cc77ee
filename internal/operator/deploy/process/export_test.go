package process

import (
	"context"
	"os"
	"testing"
)

// SkipUnsupportedf skips a test of the private mount namespaces on a system
// that does not allow them, and fails it in CI (CI=true): CI machines
// allow them, and the openMCP compatibility test depends on them there, so
// a skip in CI would hide a broken helper.
func SkipUnsupportedf(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must allow private mount namespaces: "+format, args...)
	}
	t.Skipf(format, args...)
}

// NamespaceFileError says why d starts processes without the
// service-account namespace file, or nil when it provides it.
func NamespaceFileError(d *Deployer) error {
	_, err := d.namespaceFile(context.Background())
	return err
}
