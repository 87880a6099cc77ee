package clusters

import (
	"time"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// MarketplaneGroup prefixes the labels and annotations that are specific to
// Marketplane (openMCP has no equivalent).
const MarketplaneGroup = "clusters.marketplane.io"

// Annotations Marketplane puts on or reads from Clusters.
const (
	// KubeconfigSecretAnnotation, on a Cluster, names the Secret in the
	// Cluster's namespace that holds an admin kubeconfig for the cluster
	// under the key KubeconfigSecretKey.
	KubeconfigSecretAnnotation = MarketplaneGroup + "/kubeconfig-secret"

	// ProvisionedForAnnotation, on a Cluster, holds the UID of the
	// ClusterRequest for which a Provisioner created it. Only such a
	// Cluster is handed back to the Provisioner when the request goes.
	ProvisionedForAnnotation = MarketplaneGroup + "/provisioned-for"

	// BackendAnnotation, on a Cluster, names what serves it when that is
	// not a Kubernetes cluster of its own, e.g. "kcp" for a kcp workspace.
	// Its ClusterProvider sets it.
	BackendAnnotation = MarketplaneGroup + "/backend"

	// WorkloadsAnnotation, on a Cluster, says whether Pods and their
	// controllers run there; WorkloadsNone on a kcp workspace. Its
	// ClusterProvider sets it.
	WorkloadsAnnotation = MarketplaneGroup + "/workloads"
)

// WorkloadsNone is the value of WorkloadsAnnotation on a Cluster that runs
// no Pods: AccessRequests for workload resources there are denied.
const WorkloadsNone = "none"

// KubeconfigSecretKey is the key of the admin kubeconfig in the Secret named
// by KubeconfigSecretAnnotation.
const KubeconfigSecretKey = clustersv1alpha1.SecretKeyKubeconfig

// Default controller names, also the names of their metrics and events.
const (
	// ClusterControllerName is the default name of the Cluster controller.
	ClusterControllerName = "cluster"
	// RequestControllerName is the default name of the ClusterRequest
	// controller.
	RequestControllerName = "clusterrequest"
)

// Defaults of the controllers' timing.
const (
	// DefaultReadyInterval is how often a Ready cluster is checked again.
	DefaultReadyInterval = 30 * time.Second
	// DefaultProbeTimeout bounds one reachability check.
	DefaultProbeTimeout = 5 * time.Second
	// DefaultProvisionInterval is how often a Provisioner is asked again
	// while it creates or releases a cluster.
	DefaultProvisionInterval = 10 * time.Second
)

// DefaultBackoff is how long a cluster that is not ready waits for its next
// check: at first 5 s, then as long as it has been not ready so far (so the
// waits double), at most 5 min.
var DefaultBackoff = Backoff{Min: 5 * time.Second, Max: 5 * time.Minute}

// Reason is the reason of a condition a controller of this package sets.
type Reason string

// Reasons of the Ready condition of a Cluster.
const (
	// ReasonReachable: the API server answered GET /version.
	ReasonReachable Reason = "Reachable"
	// ReasonKubeconfigMissing: the Cluster has no kubeconfig annotation,
	// or the Secret or its key does not exist.
	ReasonKubeconfigMissing Reason = "KubeconfigMissing"
	// ReasonKubeconfigInvalid: the Secret holds no usable kubeconfig.
	ReasonKubeconfigInvalid Reason = "KubeconfigInvalid"
	// ReasonUnreachable: the API server did not answer GET /version.
	ReasonUnreachable Reason = "Unreachable"
	// ReasonDeleting: the Cluster is being deleted and is no longer
	// checked.
	ReasonDeleting Reason = "Deleting"
)

// Reasons of the Ready condition of a ClusterRequest.
const (
	// ReasonGranted: status.cluster names the granted Cluster.
	ReasonGranted Reason = "Granted"
	// ReasonNoMatchingCluster: no cluster fits the request's purpose and
	// tenancy; the request is re-evaluated when Clusters change.
	ReasonNoMatchingCluster Reason = "NoMatchingCluster"
	// ReasonClusterNotReady: no Ready cluster fits, but one that fits
	// otherwise is not Ready (yet, or for the moment); the request waits
	// for it instead of being denied, and is re-evaluated when Clusters
	// change.
	ReasonClusterNotReady Reason = "ClusterNotReady"
	// ReasonProvisioning: a Provisioner is creating a cluster for the
	// request.
	ReasonProvisioning Reason = "Provisioning"
	// ReasonProvisioningFailed: the Provisioner returned an error; it is
	// asked again with backoff.
	ReasonProvisioningFailed Reason = "ProvisioningFailed"
	// ReasonClusterNotFound: the granted Cluster no longer exists.
	ReasonClusterNotFound Reason = "ClusterNotFound"
	// ReasonPolicyViolation: the access policy does not allow the request
	// (a platform cluster, or beyond the provider's limits); the message
	// names the rule. It is re-evaluated when a request of the namespace
	// comes or goes and when the provider's spec changes.
	ReasonPolicyViolation = Reason(policy.ReasonPolicyViolation)
)
