package clusteraccess

import "errors"

// Errors the Manager wraps, for errors.Is.
var (
	// ErrAccessDenied: the platform denied a ClusterRequest or an
	// AccessRequest. The error says which, with the reason and message of
	// its Ready condition. Denials are re-evaluated by the operator (for
	// example when Clusters change), so callers retry with backoff.
	ErrAccessDenied = errors.New("cluster access denied")

	// ErrMCPNotFound: the service object has no ManagedControlPlane (its
	// ClusterRequest does not exist). The error also is an
	// spruntime.InvalidUserInputError with reason ReasonMCPNotFound: the
	// user has to create the ManagedControlPlane (or fix the object's
	// name).
	ErrMCPNotFound = errors.New("ManagedControlPlane not found")
)

// ReasonMCPNotFound is the condition reason of ErrMCPNotFound.
const ReasonMCPNotFound = "MCPNotFound"
