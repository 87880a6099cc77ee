package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestManifestsAreCurrent writes the manifests into a scratch directory and
// compares them with the repository's: the chart's crds/ and config/ must be
// what `make manifests` writes (verify-generate checks the same).
func TestManifestsAreCurrent(t *testing.T) {
	out := t.TempDir()
	if err := run(out); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join("..", "..")
	for _, dir := range []string{filepath.Join("charts", "marketplane", "crds"), "config", filepath.Join("config", "crds")} {
		want := yamlFiles(t, filepath.Join(out, dir))
		got := yamlFiles(t, filepath.Join(repo, dir))
		if !slices.Equal(names(want), names(got)) {
			t.Errorf("%s holds %v, want %v: run make manifests", dir, names(got), names(want))
			continue
		}
		for name, data := range want {
			if !bytes.Equal(data, got[name]) {
				t.Errorf("%s/%s is stale: run make manifests", dir, name)
			}
		}
	}
}

func yamlFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = data
	}
	return out
}

func names(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
