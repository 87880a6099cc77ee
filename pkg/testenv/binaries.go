package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// AssetsEnv is the environment variable that names the directory holding the
// etcd, kube-apiserver and kube-controller-manager binaries. It is the same
// variable controller-runtime's envtest reads.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// ErrBinariesNotFound is returned when the API-server binaries cannot be found.
var ErrBinariesNotFound = errors.New("API-server binaries not found: run 'make tools' (builds bin/etcd and bin/kube-apiserver from source) or set " + AssetsEnv)

// BinaryDir returns the directory that holds etcd and kube-apiserver: the
// value of $KUBEBUILDER_ASSETS, or else the first bin/ directory, walking up
// from the working directory, that contains kube-apiserver.
func BinaryDir() (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		if err := checkBinaries(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w", AssetsEnv, dir, err)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find binaries: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		candidate := filepath.Join(dir, "bin")
		if checkBinaries(candidate) == nil {
			return candidate, nil
		}
		if filepath.Dir(dir) == dir {
			return "", ErrBinariesNotFound
		}
	}
}

func checkBinaries(dir string) error {
	for _, name := range []string{"etcd", "kube-apiserver"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("%w (%s is missing)", ErrBinariesNotFound, name)
		}
		if fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s in %s is not executable", name, dir)
		}
	}
	return nil
}
