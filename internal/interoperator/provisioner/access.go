package provisioner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/scheduling"
	"github.com/marketplane/marketplane/internal/render"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// InstanceAccess is the ClusterAccess of SFServiceInstances: the SFCluster
// the scheduler picks (package scheduling) for an instance without
// spec.clusterId, which the instance reconciler persists there, or the
// SFCluster spec.clusterId names once the inter-operator accepted it (the
// instance's creator pinned it there: see admit). The target cluster is
// handed out as the ClusterContext's WorkloadCluster.
type InstanceAccess struct {
	providerName string
	platform     cluster.Cluster
	engine       *Engine
	placer       *scheduling.Placer
}

var _ spruntime.ClusterAccess[*osbv1alpha1.SFServiceInstance] = &InstanceAccess{}

// NewInstanceAccess returns the ClusterAccess of instances of the
// inter-operator named providerName. It creates nothing that needs
// releasing (a decision is persisted by the instance reconciler, with the
// runtime's finalizer: spruntime.WithFinalizerByReconciler).
func NewInstanceAccess(providerName string, platform cluster.Cluster, engine *Engine, placer *scheduling.Placer) *InstanceAccess {
	return &InstanceAccess{providerName: providerName, platform: platform, engine: engine, placer: placer}
}

// Clusters implements spruntime.ClusterAccess. Configuration problems (no
// SFCluster to schedule on, an unknown SFCluster, a bad kubeconfig) are
// invalid user input; while the instance is being deleted only a missing
// SFCluster is (the cluster is gone, and the resources with it), so that a
// kubeconfig problem does not leave resources behind. An instance whose
// spec.clusterId the inter-operator never chose nor accepted has nothing
// on that cluster: its deletion does not go there.
func (a *InstanceAccess) Clusters(ctx context.Context, inst *osbv1alpha1.SFServiceInstance) (spruntime.ClusterContext, bool, error) {
	cfg, err := providerConfig(ctx, a.platform, a.providerName)
	if err != nil {
		return spruntime.ClusterContext{}, false, err
	}
	deleting := inst.DeletionTimestamp != nil
	name := inst.Spec.ClusterID
	switch {
	case deleting && inst.PlacedCluster() == "":
		a.placer.Forget(inst.UID)
		return spruntime.ClusterContext{}, false, spruntime.InvalidUserInput(string(ReasonNotScheduled), "the instance was never scheduled; nothing to delete")
	case name == "":
		if name, err = a.schedule(ctx, inst, cfg); err != nil {
			return spruntime.ClusterContext{}, false, err
		}
	case inst.PlacedCluster() == "":
		if err := a.admit(ctx, inst, cfg, name); err != nil {
			return spruntime.ClusterContext{}, false, err
		}
	}
	return target(ctx, a.engine.registry, cfg, name, deleting)
}

// schedule places an instance that names no cluster, and records the
// decision and its reason in the Scheduled condition: Unknown until the
// instance reconciler has written the decision into spec.clusterId
// (InstanceReconciler.persist turns it True), so that a condition written
// by a reconcile that failed before never vouches for a clusterId written
// later. It records no event: the condition says it without a write of its
// own (an event is one), and a decision that cannot be made shows as a
// warning of the runtime. An instance whose plan's clusterSelector matches
// no SFCluster, or whose plan cannot be scheduled, fails; one that no
// cluster can take now waits for the SFClusters to change.
func (a *InstanceAccess) schedule(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig) (string, error) {
	p, err := a.placement(ctx, inst, cfg, "it was scheduled")
	if err != nil {
		return "", err
	}
	d, err := a.placer.Place(ctx, p)
	var none *scheduling.NoClusterError
	var noMatch *scheduling.NoMatchError
	switch {
	case errors.As(err, &noMatch):
		return "", a.fail(inst, ReasonNoClusterMatches, noMatch.Message)
	case errors.As(err, &none):
		inst.Status.Description = none.Message
		// It waits, phase Pending: the SFCluster watch places it when a
		// cluster appears or changes (the inter-operator registers the
		// SFClusters of openMCP workload Clusters only after it started).
		return "", spruntime.Waiting(clusters.ReasonNoClusterAvailable, "%s", none.Message)
	case err != nil:
		return "", err
	}
	setScheduled(inst, metav1.ConditionUnknown, ReasonScheduling,
		recordingPrefix+fmt.Sprintf("Scheduled on SFCluster %s by the %s scheduler: %s", d.Cluster, d.Type, d.Why))
	logf.FromContext(ctx).V(1).Info("Scheduled instance", "cluster", d.Cluster, "scheduler", d.Type, "why", d.Why)
	return d.Cluster, nil
}

// recordingPrefix starts the message of a Scheduled condition that is
// Unknown because the decision is not in spec.clusterId yet.
const recordingPrefix = "Recording in spec.clusterId: "

// admit decides whether an instance may use the SFCluster name that its
// spec.clusterId names although the inter-operator neither chose nor
// accepted it: its creator pinned it there. That creator may be a tenant,
// who must not place instances where the scheduler would not (a cordoned
// cluster, one the plan's clusterSelector leaves out, such as a cluster
// meant for another tenant, or one without room), so the pin passes the
// scheduler's filters for that one cluster (scheduling.Placer.Admit)
// before anything is applied. Accepted, the instance counts on the cluster
// and the Scheduled condition says so (reason Pinned); refused for good
// (being deleted, cordoned, outside the clusterSelector) it fails with
// reason ClusterNotAllowed; refused for now (the SFCluster does not exist
// yet, lacks its components or room: NoClusterAvailable; is not Ready:
// ClusterUnreachable) it waits, like an instance the scheduler cannot
// place, for the SFCluster to change, and counts nowhere meanwhile.
func (a *InstanceAccess) admit(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, name string) error {
	p, err := a.placement(ctx, inst, cfg, "its spec.clusterId was accepted")
	if err != nil {
		return err
	}
	err = a.placer.Admit(ctx, p, name)
	var refused *scheduling.RefusedError
	var none *scheduling.NoClusterError
	switch {
	case errors.As(err, &refused):
		setScheduled(inst, metav1.ConditionFalse, string(ReasonClusterNotAllowed), refused.Message)
		return a.fail(inst, ReasonClusterNotAllowed, refused.Message)
	case errors.As(err, &none):
		// An unreachable cluster reads as it reads to an instance already
		// on it: ClusterUnreachable, waiting until it answers again.
		reason := clusters.ReasonNoClusterAvailable
		if none.NotReady {
			reason = string(ReasonClusterUnreachable)
		}
		setScheduled(inst, metav1.ConditionFalse, reason, none.Message)
		inst.Status.Description = none.Message
		return spruntime.Waiting(reason, "%s", none.Message)
	case err != nil:
		return err
	}
	setScheduled(inst, metav1.ConditionTrue, ReasonPinned, fmt.Sprintf("spec.clusterId pins the instance to SFCluster %s, which passed the scheduler's filters", name))
	logf.FromContext(ctx).V(1).Info("Accepted the instance's cluster", "cluster", name)
	return nil
}

// setScheduled sets the Scheduled condition of inst.
func setScheduled(inst *osbv1alpha1.SFServiceInstance, status metav1.ConditionStatus, reason, message string) {
	apimeta.SetStatusCondition(&inst.Status.Conditions, metav1.Condition{
		Type: ConditionScheduled, Status: status, Reason: reason, Message: message, ObservedGeneration: inst.Generation,
	})
}

// fail ends the operation of inst, which cannot be placed, with reason and
// message, and returns the invalid user input the runtime reports.
func (a *InstanceAccess) fail(inst *osbv1alpha1.SFServiceInstance, reason Reason, message string) error {
	failInstance(inst, message)
	a.engine.tracker.done(inst.UID)
	return spruntime.InvalidUserInput(string(reason), "%s", message)
}

// placement returns what the scheduler decides on for inst: the plan's
// requests and its rendered clusterSelector. An instance whose operation
// failed is not placed again until a new operation starts (placing it
// would only count it): the failure stands, and unless says what would
// have happened first. A plan whose requests or clusterSelector cannot be
// used fails the instance.
func (a *InstanceAccess) placement(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, unless string) (scheduling.Placement, error) {
	if inst.Status.State == osbv1alpha1.StateFailed && inst.Status.ObservedGeneration == inst.Generation {
		if err := stillFailed(inst, inst.Status.State); err != nil {
			return scheduling.Placement{}, err
		}
		return scheduling.Placement{}, spruntime.InvalidUserInput(string(ReasonNotScheduled), "the instance failed before %s: %s", unless, inst.Status.Error)
	}
	svc, plan, err := a.engine.catalogEntries(ctx, cfg, inst.Spec.ServiceID, inst.Spec.PlanID)
	if err != nil {
		return scheduling.Placement{}, waitForCatalog(a.engine, inst, err)
	}
	requests, err := clusters.PlanRequests(plan)
	if err != nil {
		return scheduling.Placement{}, a.fail(inst, ReasonSchedulingFailed, err.Error())
	}
	var selector labels.Selector
	if t, ok := plan.Template(osbv1alpha1.ActionClusterSelector); ok {
		vals, err := render.Values(svc, plan, inst, nil)
		if err != nil {
			return scheduling.Placement{}, err
		}
		vals[VarInstanceID] = idOf(inst)
		text, err := a.engine.renderer(cfg).RenderString(ctx, render.Input{Template: t, Values: vals, Namespace: inst.Namespace})
		if err != nil {
			if render.IsTransient(err) {
				return scheduling.Placement{}, err
			}
			return scheduling.Placement{}, a.fail(inst, ReasonSchedulingFailed, fmt.Sprintf("the clusterSelector template: %v", err))
		}
		if text = strings.TrimSpace(text); text != "" {
			if selector, err = labels.Parse(text); err != nil {
				return scheduling.Placement{}, a.fail(inst, ReasonSchedulingFailed, fmt.Sprintf("the clusterSelector template renders %q, which is not a label selector: %v", text, err))
			}
		}
	}
	return scheduling.Placement{
		Namespace:      cfg.CatalogNamespace(),
		Instance:       inst,
		Requests:       requests,
		Selector:       selector,
		SchedulerType:  cfg.Spec.SchedulerType,
		DefaultCluster: cfg.Spec.DefaultCluster,
	}, nil
}

// Release implements spruntime.ClusterAccess: access to SFClusters is not
// per instance, there is nothing to release.
func (a *InstanceAccess) Release(context.Context, *osbv1alpha1.SFServiceInstance) (bool, error) {
	return true, nil
}

// BindingAccess is the ClusterAccess of SFServiceBindings: the cluster of
// their instance.
type BindingAccess struct {
	providerName string
	platform     cluster.Cluster
	registry     *clusters.Registry
	instances    client.Reader
}

var _ spruntime.ClusterAccess[*osbv1alpha1.SFServiceBinding] = &BindingAccess{}

// NewBindingAccess returns the ClusterAccess of bindings of the
// inter-operator named providerName; instances reads SFServiceInstances on
// the onboarding cluster.
func NewBindingAccess(providerName string, platform cluster.Cluster, registry *clusters.Registry, instances client.Reader) *BindingAccess {
	return &BindingAccess{providerName: providerName, platform: platform, registry: registry, instances: instances}
}

// Clusters implements spruntime.ClusterAccess. A binding whose instance
// does not exist is invalid user input; one whose instance is not yet
// placed (scheduled, or its spec.clusterId accepted) waits.
func (a *BindingAccess) Clusters(ctx context.Context, b *osbv1alpha1.SFServiceBinding) (spruntime.ClusterContext, bool, error) {
	cfg, err := providerConfig(ctx, a.platform, a.providerName)
	if err != nil {
		return spruntime.ClusterContext{}, false, err
	}
	deleting := b.DeletionTimestamp != nil
	inst, err := instanceOf(ctx, a.instances, b)
	if err != nil {
		return spruntime.ClusterContext{}, false, err
	}
	if inst == nil {
		return spruntime.ClusterContext{}, false, spruntime.InvalidUserInput(string(ReasonInstanceNotFound), "the SFServiceInstance %s does not exist in namespace %s", b.Spec.InstanceID, b.Namespace)
	}
	placed := inst.PlacedCluster()
	if placed == "" {
		if deleting {
			return spruntime.ClusterContext{}, false, spruntime.InvalidUserInput(string(ReasonNotScheduled), "the instance was never scheduled; nothing to delete")
		}
		return spruntime.ClusterContext{}, false, nil
	}
	return target(ctx, a.registry, cfg, placed, deleting)
}

// Release implements spruntime.ClusterAccess: there is nothing to release.
func (a *BindingAccess) Release(context.Context, *osbv1alpha1.SFServiceBinding) (bool, error) {
	return true, nil
}

// target returns the ClusterContext of the SFCluster name.
func target(ctx context.Context, registry *clusters.Registry, cfg *interoperatorv1alpha1.ProviderConfig, name string, deleting bool) (spruntime.ClusterContext, bool, error) {
	t, err := registry.Target(ctx, cfg.CatalogNamespace(), name)
	if err != nil {
		return spruntime.ClusterContext{}, false, clusterError(err, deleting)
	}
	return spruntime.ClusterContext{WorkloadCluster: t.Cluster}, true, nil
}

// clusterError turns a configuration problem of the clusters into invalid
// user input. While deleting, only a missing SFCluster is: anything else is
// retried, so that no resources are left behind by mistake.
func clusterError(err error, deleting bool) error {
	ce, ok := clusters.AsError(err)
	if !ok || (deleting && ce.Reason != clusters.ReasonClusterNotFound) {
		return err
	}
	return spruntime.InvalidUserInput(ce.Reason, "%s", ce.Message)
}

// waitForCatalog handles an instance whose service or plan cannot be used:
// an invalid plan, or an instance that names none, fails the operation, as
// its templates would; a missing entry makes the instance wait, and
// last_operation says why. It returns err.
func waitForCatalog(engine *Engine, inst *osbv1alpha1.SFServiceInstance, err error) error {
	if uerr, ok := spruntime.AsInvalidUserInput(err); ok {
		if uerr.Reason == string(ReasonPlanInvalid) || uerr.Reason == string(ReasonMissingServiceOrPlan) {
			failInstance(inst, uerr.Message)
			engine.tracker.done(inst.UID)
		} else {
			inst.Status.Description = uerr.Message
		}
	}
	return err
}

// providerConfig reads the inter-operator's ProviderConfig.
func providerConfig(ctx context.Context, platform cluster.Cluster, name string) (*interoperatorv1alpha1.ProviderConfig, error) {
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := platform.GetClient().Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
		return nil, fmt.Errorf("get ProviderConfig %s: %w", name, err)
	}
	return cfg, nil
}

// instanceOf returns the instance of a binding, or nil when it does not
// exist: the first of SFServiceBindingSpec.InstanceNames that exists in the
// binding's namespace (the console resolves a binding's instance alike).
func instanceOf(ctx context.Context, reader client.Reader, b *osbv1alpha1.SFServiceBinding) (*osbv1alpha1.SFServiceInstance, error) {
	for _, name := range b.Spec.InstanceNames() {
		inst := &osbv1alpha1.SFServiceInstance{}
		err := reader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, inst)
		if err == nil {
			return inst, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get SFServiceInstance %s/%s: %w", b.Namespace, name, err)
		}
	}
	return nil, nil
}
