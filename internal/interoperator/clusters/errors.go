package clusters

import "errors"

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
