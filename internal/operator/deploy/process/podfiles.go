package process

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
)

// ErrNoMountNamespace is wrapped by WithPodFiles when the system refuses
// the private mount namespace the files need.
var ErrNoMountNamespace = errors.New("no private mount namespace")

// PodFiles are the service-account files a process in a pod finds in the
// directory of ServiceAccountNamespaceFile.
type PodFiles struct {
	// Namespace is the content of the namespace file.
	Namespace string
	// Token and CA are host paths, linked there as token and ca.crt;
	// empty: no such file.
	Token, CA string
}

// WithPodFiles prepares cmd, not yet started, to start in a private mount
// namespace in which files are where rest.InClusterConfig and
// controller-runtime read them in a pod, the way the process deployer
// starts providers: the host's /var/run is left untouched. With
// KUBERNETES_SERVICE_HOST and _PORT in cmd.Env, the process sees what a
// pod sees, for tests of binaries in in-cluster mode. cmd.Env must be set
// (an empty one gives an empty environment). The calling binary runs the
// helper before its main because it links this package. When the system
// refuses the mount namespace, the error wraps ErrNoMountNamespace and
// says why.
func WithPodFiles(ctx context.Context, cmd *exec.Cmd, files PodFiles) error {
	ns, err := detectNamespaceFile(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoMountNamespace, err)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if err := wrapWithNamespaceFile(cmd, nsHelperSpec{Namespace: files.Namespace, Token: files.Token, CA: files.CA}, ns); err != nil {
		return fmt.Errorf("start %s with the service-account files: %w", cmd.Path, err)
	}
	return nil
}
