package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// AssetsEnv names a directory with the control plane's binaries, the same
// variable the tests (and controller-runtime's envtest) read.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// Names of the control plane's binaries.
const (
	EtcdBinary              = "etcd"
	APIServerBinary         = "kube-apiserver"
	ControllerManagerBinary = "kube-controller-manager"
	SchedulerBinary         = "kube-scheduler"
	KwokBinary              = "kwok"
	// KwokStagesFile is kwok's stage configuration that `make tools`
	// writes beside the binary (see SimulatedNodes).
	KwokStagesFile = "kwok-stages.yaml"
)

// ErrBinaryMissing is wrapped by the errors of FindBinaries and BinDir.
var ErrBinaryMissing = errors.New("control-plane binary missing: run 'make tools' (builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok into bin/, about 5 minutes the first time)")

// Binaries are the absolute paths of the control plane's executables.
type Binaries struct {
	// Dir is the directory they are in; other binaries of the landscape
	// (providers) are looked for there too.
	Dir                                string
	Etcd, APIServer, ControllerManager string
	// Scheduler, Kwok and KwokStages run the simulated nodes of the
	// clusters that run workloads (WithWorkloads).
	Scheduler, Kwok, KwokStages string
}

// FindBinaries returns the binaries in dir, or an error naming the first
// one that is missing or not executable (and 'make tools').
func FindBinaries(dir string) (Binaries, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, fmt.Errorf("binary directory %s: %w", dir, err)
	}
	b := Binaries{
		Dir:               abs,
		Etcd:              filepath.Join(abs, EtcdBinary),
		APIServer:         filepath.Join(abs, APIServerBinary),
		ControllerManager: filepath.Join(abs, ControllerManagerBinary),
		Scheduler:         filepath.Join(abs, SchedulerBinary),
		Kwok:              filepath.Join(abs, KwokBinary),
		KwokStages:        filepath.Join(abs, KwokStagesFile),
	}
	for _, p := range []string{b.Etcd, b.APIServer, b.ControllerManager, b.Scheduler, b.Kwok} {
		if err := executable(p); err != nil {
			return Binaries{}, fmt.Errorf("%w: %w", err, ErrBinaryMissing)
		}
	}
	if fi, err := os.Stat(b.KwokStages); err != nil || fi.IsDir() {
		return Binaries{}, fmt.Errorf("%s not found: %w", b.KwokStages, ErrBinaryMissing)
	}
	return b, nil
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s not found", path)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}

// BinDir returns where the binaries are: explicit when set; else the
// directory of the running executable when kube-apiserver is beside it
// (bin/marketplane); else $KUBEBUILDER_ASSETS; else the first bin/ with
// kube-apiserver walking up from the working directory. It does not check
// the other binaries; FindBinaries does.
func BinDir(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if exe, err := os.Executable(); err == nil {
		if dir := filepath.Dir(exe); executable(filepath.Join(dir, APIServerBinary)) == nil {
			return dir, nil
		}
	}
	if dir := os.Getenv(AssetsEnv); dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find binaries: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if executable(filepath.Join(dir, "bin", APIServerBinary)) == nil {
			return filepath.Join(dir, "bin"), nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no bin/%s in %s or above: %w", APIServerBinary, wd, ErrBinaryMissing)
		}
	}
}
