package access

import (
	"time"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// ControllerName is the default name of the AccessRequest controller, also
// the name of its metrics and events.
const ControllerName = "accessrequest"

// AccessNamespace is the namespace on a target cluster that holds the
// ServiceAccounts of AccessRequests.
const AccessNamespace = "marketplane-access"

// ManagedByValue is the value of the managed-by label on every object the
// controller creates on a target cluster.
const ManagedByValue = "marketplane-operator"

// Finalizer is put on an AccessRequest before anything is created for it on
// the target cluster, and removed once that is deleted again.
const Finalizer = clustersv1alpha1.GroupName + "/accessrequest"

// Labels and annotations of the controller.
const (
	// RequestUIDLabel, on every object created on a target cluster, holds
	// the UID of the AccessRequest it was created for.
	RequestUIDLabel = clusters.MarketplaneGroup + "/accessrequest-uid"
	// RequestAnnotation, on every object created on a target cluster,
	// holds "<namespace>/<name>" of the AccessRequest, for people.
	RequestAnnotation = clusters.MarketplaneGroup + "/accessrequest"
	// TargetClusterAnnotation, on an AccessRequest, holds
	// "<namespace>/<name>" of the Cluster on which objects were created, so
	// that they can be deleted even when the ClusterRequest is gone.
	TargetClusterAnnotation = clusters.MarketplaneGroup + "/target-cluster"
	// ServiceAccountUIDAnnotation, on the kubeconfig Secret, holds the UID
	// of the ServiceAccount the token belongs to; a recreated
	// ServiceAccount invalidates the token, which is then minted anew.
	ServiceAccountUIDAnnotation = clusters.MarketplaneGroup + "/service-account-uid"
	// TokenTTLAnnotation, on the kubeconfig Secret, holds the TTL that was
	// asked for when the token was minted; a changed spec.ttl mints anew.
	TokenTTLAnnotation = clusters.MarketplaneGroup + "/token-ttl"
	// NamespaceOwnerLabel, on a namespace of a target cluster, names the
	// provider (ProviderID) that created it, or for which the controller
	// created it. Only that provider may write in it and delete it
	// (admission.go).
	NamespaceOwnerLabel = clusters.MarketplaneGroup + "/provider"
)

// Defaults of the token lifetime and the controller's timing.
const (
	// DefaultTTL is the token lifetime when spec.ttl is unset.
	DefaultTTL = 24 * time.Hour
	// MinTTL is the shortest token lifetime the TokenRequest API grants; a
	// shorter spec.ttl is raised to it.
	MinTTL = 10 * time.Minute
	// RefreshRatio is the part of a token's lifetime after which it is
	// replaced.
	RefreshRatio = 0.8
	// DefaultResyncInterval is the longest time between two reconciles of
	// a granted request, which repair drift on the target cluster.
	DefaultResyncInterval = 10 * time.Minute
	// TargetTimeout bounds each request to a target cluster.
	TargetTimeout = 10 * time.Second
)

// Reason is the reason of a condition the controller sets.
type Reason string

// Reasons of the Ready condition of an AccessRequest.
const (
	// ReasonGranted: the kubeconfig Secret is written and current.
	ReasonGranted Reason = "Granted"
	// ReasonClusterNotFound: the Cluster does not exist (yet).
	ReasonClusterNotFound Reason = "ClusterNotFound"
	// ReasonClusterRequestNotFound: the ClusterRequest does not exist.
	ReasonClusterRequestNotFound Reason = "ClusterRequestNotFound"
	// ReasonClusterRequestPending: the ClusterRequest is not granted yet.
	ReasonClusterRequestPending Reason = "ClusterRequestPending"
	// ReasonClusterRequestDenied: the ClusterRequest was denied.
	ReasonClusterRequestDenied Reason = "ClusterRequestDenied"
	// ReasonKubeconfigMissing: the Cluster's admin kubeconfig is missing.
	ReasonKubeconfigMissing = Reason(clusters.ReasonKubeconfigMissing)
	// ReasonKubeconfigInvalid: the Cluster's admin kubeconfig is unusable.
	ReasonKubeconfigInvalid = Reason(clusters.ReasonKubeconfigInvalid)
	// ReasonUnreachable: the target cluster's API server did not answer.
	ReasonUnreachable = Reason(clusters.ReasonUnreachable)
	// ReasonApplyFailed: the target cluster refused an object.
	ReasonApplyFailed Reason = "ApplyFailed"
	// ReasonNamespaceMissing: a namespace the request needs does not exist
	// and may not be created (disableAutomaticNamespaceCreation, or a
	// roleRef to a Role in it).
	ReasonNamespaceMissing Reason = "NamespaceMissing"
	// ReasonRoleConflict: a role of a requested name exists and belongs to
	// someone else.
	ReasonRoleConflict Reason = "RoleConflict"
	// ReasonSecretConflict: a Secret of the kubeconfig Secret's name exists
	// and belongs to someone else.
	ReasonSecretConflict Reason = "SecretConflict"
	// ReasonOIDCNotSupported: OIDC access was asked for.
	ReasonOIDCNotSupported Reason = "OIDCNotSupported"
	// ReasonInvalidSpec: neither clusterRef nor requestRef, or no token,
	// is given.
	ReasonInvalidSpec Reason = "InvalidSpec"
	// ReasonPolicyViolation: the access policy does not allow the request
	// (docs/operator.md, "Access policy"); the message names the rule.
	ReasonPolicyViolation Reason = policy.ReasonPolicyViolation
	// ReasonPolicyCheckFailed: the access policy could not be checked (a
	// cluster it reads did not answer); retried with backoff.
	ReasonPolicyCheckFailed Reason = "PolicyCheckFailed"
	// ReasonAdmissionNotEnforced: the admission policies that keep
	// providers apart on the target cluster (admission.go) could not be
	// installed, or the API server does not enforce them yet; nothing is
	// granted to a provider until it does. Retried with backoff.
	ReasonAdmissionNotEnforced Reason = "AdmissionNotEnforced"
	// ReasonWorkloadsNotSupported: the request names workload resources
	// (Pods and their controllers) on a Cluster that runs none (annotation
	// clusters.marketplane.io/workloads: none, e.g. a kcp workspace).
	ReasonWorkloadsNotSupported Reason = "WorkloadsNotSupported"
)
