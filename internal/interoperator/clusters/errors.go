package clusters

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Reasons of the errors of this package, as condition reasons.
const (
	// ReasonNoClusterAvailable: there is no SFCluster an instance could
	// be scheduled on.
	ReasonNoClusterAvailable = "NoClusterAvailable"
	// ReasonClusterNotFound: the SFCluster an instance names does not
	// exist.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonInvalidKubeconfig: the SFCluster's kubeconfig Secret is
	// missing or holds no usable kubeconfig.
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
)

// Error is a configuration problem of the clusters: retrying cannot fix
// it, a change of the SFClusters or their Secrets can.
type Error struct {
	// Reason is one of the Reason constants.
	Reason string
	// Message says what is wrong.
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// AsError reports whether err is or wraps an *Error, and returns it.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// Unreachable reports whether err says that a cluster did not answer: no
// connection, a timeout, or a gateway or availability error of the API
// server, as opposed to an answer about the request. The provisioner and
// the replicator retry such errors without counting them as failures.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
			status.Status().Code == 502 || status.Status().Code == 504
	}
	var urlErr *url.Error
	var netErr net.Error
	var opErr *net.OpError
	return errors.As(err, &urlErr) || errors.As(err, &netErr) || errors.As(err, &opErr) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}
