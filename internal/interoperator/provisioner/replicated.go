package provisioner

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Replicator provisions the instances and bindings of SFClusters in
// provisioning mode replicate (Service Fabrik's MultiClusterDeployer): it
// copies them to the cluster, where an inter-operator of its own renders
// them, and copies their status back into the object it is given, which
// the provider runtime then writes. The instance and binding reconcilers
// hand such objects to it instead of rendering them; scheduling,
// finalizers, conditions and events stay theirs and the runtime's.
// Package replicate implements it.
type Replicator interface {
	// Instance replicates inst, scheduled on the cluster of cc. starting
	// says that an operation starts (the broker asked for one, or the
	// spec changed); otherwise the state is "in progress" or terminal.
	Instance(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext, svc *osbv1alpha1.SFService, plan *osbv1alpha1.SFPlan, starting bool) (ctrl.Result, error)
	// DeleteInstance deletes the replica of inst and reports done (a zero
	// result) once it is gone.
	DeleteInstance(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (ctrl.Result, error)
	// Binding replicates b, a binding of inst, whose operation starts or
	// is in progress.
	Binding(ctx context.Context, b *osbv1alpha1.SFServiceBinding, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext, starting bool) (ctrl.Result, error)
	// DeleteBinding deletes the replica of b and the bind response Secret,
	// and reports done once the replica is gone.
	DeleteBinding(ctx context.Context, b *osbv1alpha1.SFServiceBinding, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (ctrl.Result, error)
}

// replicaSources are the sources of the instance and binding controllers
// that a Replicator adds (either may be nil).
type replicaSources [2]source.Source

// WithReplicator hands the instances and bindings of SFClusters in
// provisioning mode replicate to r. instanceEvents and bindingEvents, when
// not nil, are further sources of the instance and binding controllers:
// changes of the replicas, which must bring the originals back.
func WithReplicator(r Replicator, instanceEvents, bindingEvents source.Source) EngineOption {
	return func(e *Engine) {
		e.replicator = r
		e.replicaEvents = replicaSources{instanceEvents, bindingEvents}
	}
}

// replicated reports whether the objects on the cluster of cc are left to
// the Replicator: the Engine has one and the SFCluster's provisioningMode
// is replicate. A cluster that is gone is not replicated (access reports
// it).
func (e *Engine) replicated(ctx context.Context, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (bool, error) {
	if e.replicator == nil || cc.WorkloadCluster == nil {
		return false, nil
	}
	sfc := &resourcev1alpha1.SFCluster{}
	key := client.ObjectKey{Namespace: cfg.CatalogNamespace(), Name: cc.WorkloadCluster.Name()}
	if err := e.platform.GetClient().Get(ctx, key, sfc); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get SFCluster %s: %w", key, err)
	}
	return sfc.Spec.ProvisioningMode == resourcev1alpha1.ProvisioningReplicate, nil
}

// replicate hands an instance on a replicated cluster to the Replicator,
// after what the instance reconciler does for every instance: record the
// scheduling decision, and find the service and plan (a missing one makes
// the instance wait, an invalid one fails it).
func (r *InstanceReconciler) replicate(ctx context.Context, inst *osbv1alpha1.SFServiceInstance, cfg *interoperatorv1alpha1.ProviderConfig, cc spruntime.ClusterContext) (ctrl.Result, error) {
	state := inst.Status.State
	starting := opStarting(state) || inst.Status.ObservedGeneration != inst.Generation
	// The finalizer and the cluster, before the replica exists. The plan
	// hash is not recorded: the replica's inter-operator updates it when
	// its copy of the plan changes.
	if err := r.persist(ctx, inst, cc.WorkloadCluster.Name(), &osbv1alpha1.SFPlan{}); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	finished := !starting && state.IsTerminal()
	svc, plan, err := r.engine.catalogEntries(ctx, cfg, inst.Spec.ServiceID, inst.Spec.PlanID)
	if err != nil {
		if finished {
			return ctrl.Result{}, stillFailed(inst, state)
		}
		return ctrl.Result{}, waitForCatalog(r.engine, inst, err)
	}
	// A finished operation is passed on too: the replica's inter-operator
	// needs the current plan (autoUpdateInstances), which the Replicator
	// copies.
	res, err := r.engine.replicator.Instance(ctx, inst, cfg, cc, svc, plan, starting)
	if err == nil && finished {
		err = stillFailed(inst, state)
	}
	return res, err
}
