package provisioner

import (
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
)

// Reason is a reason of an instance's or binding's Ready condition.
type Reason string

// Reasons of the Ready condition, besides the provider runtime's.
const (
	// ReasonPlanNotFound: no SFPlan of the catalog namespace has the
	// object's planId. The object waits for the plan.
	ReasonPlanNotFound Reason = "PlanNotFound"
	// ReasonServiceNotFound: no SFService has the object's serviceId, or
	// the plan belongs to another service. The object waits.
	ReasonServiceNotFound Reason = "ServiceNotFound"
	// ReasonMissingServiceOrPlan: the instance has no spec.serviceId or
	// spec.planId (an instance without spec, which the CRD accepts as
	// Service Fabrik's does). It fails.
	ReasonMissingServiceOrPlan Reason = "MissingServiceOrPlan"
	// ReasonPlanInvalid: the catalog found the plan invalid for its
	// current generation. The operation fails, as the plan's templates
	// would (docs/interoperator.md); an update of the instance, or a plan
	// change when the plan has autoUpdateInstances, tries again.
	ReasonPlanInvalid Reason = "PlanInvalid"
	// ReasonInstanceNotFound: the binding's instance does not exist.
	ReasonInstanceNotFound Reason = "InstanceNotFound"
	// ReasonInstanceNotReady: the binding waits for its instance to be
	// provisioned.
	ReasonInstanceNotReady Reason = "InstanceNotReady"
	// ReasonInstanceFailed: the binding's instance failed; it cannot be
	// bound.
	ReasonInstanceFailed Reason = "InstanceFailed"
	// ReasonTemplateFailed: a template did not render.
	ReasonTemplateFailed Reason = "TemplateFailed"
	// ReasonInvalidResource: the render produced objects that cannot be
	// applied.
	ReasonInvalidResource Reason = "InvalidResource"
	// ReasonResourceRejected: the target cluster's API server rejected an
	// object.
	ReasonResourceRejected Reason = "ResourceRejected"
	// ReasonKindNotServed: a rendered object is of a kind (group, version)
	// the target cluster does not serve, or a Helm chart's crds/ CRD the
	// cluster lacks is of an apiVersion it does not serve. The operation
	// fails at once: nothing the provisioner does installs the kind.
	ReasonKindNotServed Reason = "KindNotServed"
	// ReasonRetriesExhausted: transient errors persisted for
	// limits.maxTransientErrors attempts.
	ReasonRetriesExhausted Reason = "RetriesExhausted"
	// ReasonOperationFailed: the status template reported failed.
	ReasonOperationFailed Reason = "OperationFailed"
	// ReasonInProgress: the resources are applied and the status template
	// reports the operation in progress.
	ReasonInProgress Reason = "InProgress"
	// ReasonDeleting: deprovision or unbind waits for resources to be gone.
	ReasonDeleting Reason = "DeletingResources"
	// ReasonNotScheduled: an instance being deleted was never scheduled;
	// there is nothing to delete.
	ReasonNotScheduled Reason = "NotScheduled"
	// ReasonRenderedObjectRefused: the render policy refused a rendered
	// object (a cluster-scoped kind, a namespace that is not the
	// instance's, a role binding to cluster-admin…); nothing was applied.
	ReasonRenderedObjectRefused Reason = "RenderedObjectRefused"
	// ReasonSourceRefused: the render policy refused a source (an object
	// of another instance, or outside the instance's namespaces).
	ReasonSourceRefused Reason = "SourceRefused"
	// ReasonResourceConflict: a rendered object, or namespace, exists and
	// belongs to another instance or binding (its UID label says so);
	// nothing was applied. An instance never takes over another's objects.
	ReasonResourceConflict Reason = "ResourceConflict"
	// ReasonResourceTooLarge: a rendered object, or a bind response, is
	// larger than etcd would store; nothing was applied.
	ReasonResourceTooLarge Reason = "ResourceTooLarge"
	// ReasonParametersTooLarge: the parameters of the request are larger
	// than an instance or binding can record.
	ReasonParametersTooLarge Reason = "ParametersTooLarge"
	// ReasonNoClusterMatches: the plan's clusterSelector matches no
	// SFCluster; the instance fails, as in Service Fabrik.
	ReasonNoClusterMatches Reason = "NoClusterMatches"
	// ReasonClusterUnreachable: the target cluster's API server cannot be
	// reached; the operation is retried with backoff until it can, and
	// never fails for it.
	ReasonClusterUnreachable Reason = "ClusterUnreachable"
	// ReasonSchedulingFailed: the plan's clusterSelector or
	// context.requests cannot be used; the instance fails.
	ReasonSchedulingFailed Reason = "SchedulingFailed"
	// ReasonClusterNotAllowed: the SFCluster spec.clusterId names, which
	// the inter-operator did not choose, refuses the instance for good (it
	// is being deleted or cordoned, or the plan's clusterSelector leaves
	// it out); the instance fails and nothing is applied.
	ReasonClusterNotAllowed Reason = "ClusterNotAllowed"
)

// ConditionScheduled is the condition that records where an instance is
// placed and why (osbv1alpha1.ConditionScheduled).
const ConditionScheduled = osbv1alpha1.ConditionScheduled

// Reasons of the Scheduled condition, besides ReasonClusterNotAllowed and
// clusters.ReasonNoClusterAvailable (False: the SFCluster spec.clusterId
// names refuses the instance, for good or for now).
const (
	// ReasonScheduled: True, the scheduler placed the instance on the
	// SFCluster spec.clusterId names.
	ReasonScheduled = "Scheduled"
	// ReasonScheduling: Unknown, the scheduler chose a cluster that is not
	// recorded in spec.clusterId yet.
	ReasonScheduling = "Scheduling"
	// ReasonPinned: True, spec.clusterId was set by the instance's creator
	// and the SFCluster passed the scheduler's filters.
	ReasonPinned = "Pinned"
)

// Labels the provisioner puts on every object it applies, so that the
// objects of an instance or binding can be found on the target cluster.
const (
	// LabelInstanceID holds the instance's id on target clusters
	// (InstanceID, the template variable .instanceId).
	LabelInstanceID = apply.LabelInstanceID
	// LabelBindingID holds the name of the SFServiceBinding of bind
	// resources.
	LabelBindingID = apply.LabelBindingID
	// LabelInstanceUID holds the UID of the SFServiceInstance: what tells
	// an instance's objects from another's.
	LabelInstanceUID = apply.LabelInstanceUID
	// LabelBindingUID holds the UID of the SFServiceBinding of bind
	// resources.
	LabelBindingUID = apply.LabelBindingUID
)

// BindingSecretPrefix starts the name of the Secret with a binding's bind
// response: sf-<binding name>, as Service Fabrik names it.
const BindingSecretPrefix = "sf-"
