package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// ConditionResourcesAccepted is providerv1alpha1.ConditionResourcesAccepted.
const ConditionResourcesAccepted = providerv1alpha1.ConditionResourcesAccepted

// ReasonResourcesAccepted is the reason of ResourcesAccepted=True.
const ReasonResourcesAccepted providerv1alpha1.ConditionReason = "ResourcesAccepted"

// maxRejectionsInMessage bounds the condition message: status.resources is
// written by the provider and may be long.
const maxRejectionsInMessage = 10

// ownership computes which API groups the providers own, from the API
// server rather than the cache, so that what obj registered a moment ago
// counts.
func (r *Reconciler[T]) ownership(ctx context.Context) (*policy.Ownership, error) {
	o, err := policy.LoadOwnership(ctx, r.opts.reader)
	if err != nil {
		return nil, fmt.Errorf("compute API group ownership: %w", err)
	}
	return o, nil
}

// setResourcesAccepted records on st which entries of obj are not honoured.
func (r *Reconciler[T]) setResourcesAccepted(ctx context.Context, st *providerv1alpha1.DeploymentStatus, obj T, own *policy.Ownership) {
	rejected := own.Rejected(r.kind.Name, obj.GetName())
	gen := obj.GetGeneration()
	if len(rejected) == 0 {
		setConditionf(st, gen, ConditionResourcesAccepted, metav1.ConditionTrue, ReasonResourcesAccepted,
			"the provider owns the API groups of all registered kinds")
		return
	}
	msgs := make([]string, 0, min(len(rejected), maxRejectionsInMessage)+1)
	for i, rej := range rejected {
		if i == maxRejectionsInMessage {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(rejected)-i))
			break
		}
		msgs = append(msgs, rej.Message)
	}
	logf.FromContext(ctx).V(1).Info("Not honouring entries of the provider's API groups", "rejected", len(rejected))
	setConditionf(st, gen, ConditionResourcesAccepted, metav1.ConditionFalse, providerv1alpha1.ConditionReason(rejected[0].Reason),
		"%s", strings.Join(msgs, "; "))
}

// recordOwnedGroups records on a ServiceProvider the API groups it owns by
// registration (policy.AnnotationOwnedGroups), so that they stay its own
// while it registers them: a provider that registers one of them later is
// refused, however old it is. The patch touches that annotation only and
// leaves obj, whose status is not written yet, as it is.
func (r *Reconciler[T]) recordOwnedGroups(ctx context.Context, obj T, own *policy.Ownership) error {
	if r.kind.Name != policy.KindServiceProvider {
		return nil
	}
	want := policy.RecordGroups(own.RegisteredGroups(r.kind.Name, obj.GetName()))
	if obj.GetAnnotations()[policy.AnnotationOwnedGroups] == want {
		return nil
	}
	cp := obj.DeepCopyObject().(T)
	base := cp.DeepCopyObject().(T)
	annotations := cp.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	if want == "" {
		delete(annotations, policy.AnnotationOwnedGroups)
	} else {
		annotations[policy.AnnotationOwnedGroups] = want
	}
	cp.SetAnnotations(annotations)
	if err := r.client.Patch(ctx, cp, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("record the API groups %s %s owns: %w", r.kind.Name, obj.GetName(), err)
	}
	logf.FromContext(ctx).V(1).Info("Recorded the API groups the provider owns by registration", "groups", want)
	return nil
}

// enqueueAll maps a change of any provider to every provider of r's kind:
// one provider's claim can change what the others own.
func (r *Reconciler[T]) enqueueAll(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := r.kind.NewList()
		if err := c.List(ctx, list); err != nil {
			logf.FromContext(ctx).Error(err, "List providers to re-evaluate API group ownership", "kind", r.kind.Name)
			return nil
		}
		var reqs []reconcile.Request
		_ = apimeta.EachListItem(list, func(o runtime.Object) error {
			if m, err := apimeta.Accessor(o); err == nil {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: m.GetName()}})
			}
			return nil
		})
		return reqs
	}
}

// ownershipChanged passes the events that can change API group ownership:
// a provider appears or goes, or its spec.accessPolicy.apiGroups or
// status.resources change.
var ownershipChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldGroups, oldResources := ownershipInputs(e.ObjectOld)
		newGroups, newResources := ownershipInputs(e.ObjectNew)
		return !slices.Equal(oldGroups, newGroups) || !slices.Equal(oldResources, newResources)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// ownershipInputs returns what ownership is computed from for one provider.
func ownershipInputs(o client.Object) ([]string, []metav1.GroupVersionKind) {
	var spec *providerv1alpha1.DeploymentSpec
	var resources []metav1.GroupVersionKind
	switch p := o.(type) {
	case *providerv1alpha1.ServiceProvider:
		spec, resources = &p.Spec.DeploymentSpec, p.Status.Resources
	case *providerv1alpha1.ClusterProvider:
		spec = &p.Spec.DeploymentSpec
	case *providerv1alpha1.PlatformService:
		spec = &p.Spec.DeploymentSpec
	default:
		return nil, nil
	}
	if spec.AccessPolicy == nil {
		return nil, resources
	}
	return spec.AccessPolicy.APIGroups, resources
}
