package kcpprovider

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/marketplane/marketplane/internal/operator/clusters"
)

// Annotations and labels the provider puts on Clusters, Secrets and
// Workspaces.
const (
	// BackendAnnotation, on a Cluster, names what serves it (Backend).
	BackendAnnotation = clusters.MarketplaneGroup + "/backend"
	// WorkloadsAnnotation, on a Cluster, says whether workloads (pods and
	// their controllers) run there; "none" on a kcp workspace.
	WorkloadsAnnotation = clusters.MarketplaneGroup + "/workloads"
	// WorkspaceAnnotation, on a Cluster and on its kubeconfig Secret, holds
	// the logical path of the Cluster's kcp workspace, e.g. root:mp-1a2b.
	WorkspaceAnnotation = clusters.MarketplaneGroup + "/kcp-workspace"
	// LogicalClusterAnnotation, on a kubeconfig Secret, holds the ID of
	// the logical cluster its token was issued in; a workspace created
	// again has another, and the token is then issued again.
	LogicalClusterAnnotation = clusters.MarketplaneGroup + "/kcp-logical-cluster"
	// ClusterAnnotation, on a Workspace, names the Cluster it serves
	// (namespace/name), for people looking at kcp.
	ClusterAnnotation = clusters.MarketplaneGroup + "/cluster"
	// ClusterUIDLabel, on a Workspace, holds the UID of the Cluster it
	// serves. A Workspace without it, or with another UID, is never
	// adopted.
	ClusterUIDLabel = clusters.MarketplaneGroup + "/cluster-uid"
	// Finalizer keeps a Cluster until its Workspace and Secret are gone.
	Finalizer = clusters.MarketplaneGroup + "/kcp-provider"
)

// Values of the annotations above.
const (
	// Backend is the value of BackendAnnotation.
	Backend = "kcp"
	// WorkloadsNone is the value of WorkloadsAnnotation: a workspace runs
	// no pods.
	WorkloadsNone = "none"
)

// Names of what the provider creates.
const (
	// WorkspacePrefix starts every Workspace name; a hash of the Cluster's
	// UID follows.
	WorkspacePrefix = "mp-"
	// SecretSuffix ends the name of a Cluster's kubeconfig Secret:
	// <cluster>-kubeconfig.
	SecretSuffix = "-kubeconfig"
	// AdminNamespace, AdminServiceAccount and AdminBinding are the
	// namespace, ServiceAccount and ClusterRoleBinding (to cluster-admin)
	// of the admin identity inside each workspace.
	AdminNamespace      = "marketplane-system"
	AdminServiceAccount = "marketplane-admin"
	AdminBinding        = "marketplane-admin"
	// ControllerName names the controller, its metrics and events.
	ControllerName = "kcp-cluster"
)

// Defaults of the provider's timing.
const (
	// DefaultTokenLifetime is how long a workspace admin token lasts.
	DefaultTokenLifetime = 24 * time.Hour
	// RenewFraction of a token's life passes before it is renewed.
	RenewFraction = 0.8
	// DefaultWorkspaceWait is how long a Cluster waits before the next look
	// at a Workspace that is not Ready or not gone yet.
	DefaultWorkspaceWait = 2 * time.Second
	// DefaultKCPTimeout bounds each request to kcp, so that a kcp that
	// does not answer holds a worker no longer than this.
	DefaultKCPTimeout = 15 * time.Second
)

// DefaultBackoff is the first and the longest wait before a failed Cluster
// is tried again; the waits double in between.
var DefaultBackoff = [2]time.Duration{time.Second, 5 * time.Minute}

// WorkspaceGVR is kcp's Workspace resource, reached through a dynamic
// client so that no kcp module is needed.
var WorkspaceGVR = schema.GroupVersionResource{Group: "tenancy.kcp.io", Version: "v1alpha1", Resource: "workspaces"}

// Reason is the reason of an event the provider records on a Cluster.
type Reason string

// Reasons of the provider's events.
const (
	// ReasonWorkspaceCreated: the Cluster's Workspace was created.
	ReasonWorkspaceCreated Reason = "WorkspaceCreated"
	// ReasonWorkspaceConflict: a Workspace of the Cluster's name exists
	// but serves another Cluster (or none); it is not adopted.
	ReasonWorkspaceConflict Reason = "WorkspaceConflict"
	// ReasonKCPError: a request to kcp or the platform failed; it is
	// retried with backoff.
	ReasonKCPError Reason = "KCPError"
	// ReasonKubeconfigIssued: a new admin kubeconfig was written.
	ReasonKubeconfigIssued Reason = "KubeconfigIssued"
	// ReasonWorkspaceDeleted: the Workspace is gone and the Cluster
	// released.
	ReasonWorkspaceDeleted Reason = "WorkspaceDeleted"
)
