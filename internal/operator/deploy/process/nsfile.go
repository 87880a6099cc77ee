package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/go-logr/logr"
)

// Leader election of local processes. controller-runtime's manager, when
// LeaderElectionNamespace is empty, reads the namespace of its leases from
// the fixed file ServiceAccountNamespaceFile, which only exists in a pod;
// outside a cluster it fails with "unable to find leader election
// namespace: not running in-cluster". An unmodified provider has no other
// way to learn the namespace: a flag it does not define makes it exit, and
// controller-runtime reads no environment variable for it. Writing that
// file on the host is out of the question (it is shared by everything
// there, and a process deployer in a pod would overwrite its own), so the
// deployer starts every process in a private mount namespace in which a
// tmpfs provides the file with the provider's namespace (see
// nsfile_linux.go). Where that is not possible (not Linux, or no right to
// create mount namespaces, as in some CI containers) processes start
// without the file, the deployer logs why once, and every run status says
// so: such providers can still run one replica without leader election.

// ServiceAccountNamespaceFile is where controller-runtime and client-go
// look for the namespace of an in-cluster process. Providers started by
// the process deployer find their namespace there when the system allows a
// private mount namespace.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// nsHelperEnv marks a process as the namespace helper: the deployer runs
// its own executable with this variable set to a JSON nsHelperSpec. The
// helper provides the namespace file and then replaces itself with the
// provider (see runNamespaceHelper). The variable is removed before that,
// so the provider never sees it.
const nsHelperEnv = "MARKETPLANE_PROCESS_NAMESPACE_HELPER"

// nsHelperSpec tells the helper what to do.
type nsHelperSpec struct {
	// Namespace goes into the namespace file.
	Namespace string `json:"namespace"`
	// Binary is the provider to execute, with the helper's own arguments
	// (argv[0] included). Empty in check mode, where the helper only
	// verifies that it can provide the file and exits.
	Binary string `json:"binary,omitempty"`
	// DropCapabilities makes the helper drop every capability before it
	// executes the provider: set when it runs as root of a user namespace.
	DropCapabilities bool `json:"dropCapabilities,omitempty"`
	// Token and CA are the host paths of the process's token and of the
	// platform CA bundle; the helper links them as token and ca.crt next to
	// the namespace file, so that client-go's in-cluster configuration
	// (rest.InClusterConfig) works as in a pod. Empty: no link.
	Token string `json:"token,omitempty"`
	CA    string `json:"ca,omitempty"`
}

// nsHelperFailed is the helper's exit code when it cannot provide the
// file or execute the provider; its reason is in the process's log.
const nsHelperFailed = 125

// init runs the helper in any binary that embeds the deployer (the
// operator, the marketplane CLI, test binaries), before their main: the
// deployer can only rely on its own executable being there. Without the
// marker it costs one environment lookup.
func init() {
	if spec, ok := os.LookupEnv(nsHelperEnv); ok {
		os.Exit(runNamespaceHelper(spec))
	}
}

// errNamespaceFileOff is the reason when WithoutNamespaceFile was given.
var errNamespaceFileOff = errors.New("turned off (WithoutNamespaceFile)")

// WithoutNamespaceFile starts processes directly, without the private
// mount namespace that provides ServiceAccountNamespaceFile.
func WithoutNamespaceFile() Option {
	return func(o *options) {
		o.namespaceFile = func(context.Context) (*syscall.SysProcAttr, error) { return nil, errNamespaceFileOff }
	}
}

// namespaceFileState is what the Deployer found out, once, about providing
// the namespace file.
type namespaceFileState struct {
	// attr holds the clone flags and ID mappings of the helper's
	// namespaces; nil when the file cannot be provided, for the reason in
	// err.
	attr *syscall.SysProcAttr
	err  error
}

// namespaceFile returns how to start processes so that they find the
// namespace file, finding it out on first use: nil and the reason when
// they start without it.
func (d *Deployer) namespaceFile(ctx context.Context) (*syscall.SysProcAttr, error) {
	d.nsOnce.Do(func() {
		// Not cancelled with the caller: the outcome is kept for good.
		attr, err := d.opts.namespaceFile(context.WithoutCancel(ctx))
		if err != nil {
			err = fmt.Errorf("no %s for leader election: %w", ServiceAccountNamespaceFile, err)
			logr.FromContextOrDiscard(ctx).Info("Provider processes start without the service-account namespace file; "+
				"providers that elect a leader without setting its namespace (runReplicas > 1) will fail", "reason", err.Error())
		}
		d.ns = namespaceFileState{attr: attr, err: err}
	})
	return d.ns.attr, d.ns.err
}
