package landscape

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/marketplane/marketplane/internal/operator/deploy/process"
)

// TestRecordedUserImages checks that a resumed landscape finds the image
// mappings the user gave to the earlier run, and only those, in the image
// map that run wrote.
func TestRecordedUserImages(t *testing.T) {
	dir := t.TempDir()
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sample", "etcd"} {
		if err := os.WriteFile(filepath.Join(binDir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "images.yaml")
	if got := recordedUserImages(path); got != nil {
		t.Errorf("recordedUserImages without a file = %v; want none", got)
	}
	user := []process.ImageMapping{{Image: "registry.invalid/acme/p:v1", Binary: "/opt/p"}}
	if err := WriteImageMap(path, binDir, user); err != nil {
		t.Fatal(err)
	}
	all, err := process.LoadImageMap(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Images) != 2 {
		t.Fatalf("image map = %v; want the generated sample entry and the user's", all.Images)
	}
	if got := recordedUserImages(path); !slices.Equal(got, user) {
		t.Errorf("recordedUserImages = %v; want %v", got, user)
	}
}
