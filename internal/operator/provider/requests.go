package provider

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/pkg/providerrequests"
)

// ConditionRequestsGranted is False while an AccessRequest or ClusterRequest
// of the provider is Denied; its message names each such request with the
// reason and message of its denial (for a policy violation, the rule). A
// provider's init or run that waits for a request the policy refuses, or
// gives up and exits, then shows why on the provider object itself. The
// requests counted are those in the provider's namespace and, for a
// ServiceProvider, those whose openmcp.cloud/managed-by label names it, in
// the platform namespaces of ManagedControlPlanes (the label openMCP's
// clusteraccess library sets there, which only the provider may write).
const ConditionRequestsGranted providerv1alpha1.ConditionType = "RequestsGranted"

// Reasons of RequestsGranted.
const (
	// ReasonNoneDenied: no request of the provider is Denied.
	ReasonNoneDenied providerv1alpha1.ConditionReason = "NoneDenied"
	// ReasonRequestDenied: at least one request of the provider is Denied.
	ReasonRequestDenied providerv1alpha1.ConditionReason = "RequestDenied"
	// ReasonListFailed: the provider's requests could not be listed.
	ReasonListFailed providerv1alpha1.ConditionReason = "ListFailed"
)

// maxDeniedInMessage bounds the condition message: a provider can make
// many requests.
const maxDeniedInMessage = 5

// setRequestsGranted records on st whether a request of obj, whose
// namespace is namespace, is Denied.
func (r *Reconciler[T]) setRequestsGranted(ctx context.Context, st *providerv1alpha1.DeploymentStatus, obj T, namespace string) error {
	denied, err := providerrequests.Denied(ctx, r.client, r.kind.Name, obj.GetName(), namespace)
	if err != nil {
		return err
	}
	gen := obj.GetGeneration()
	if len(denied) == 0 {
		setConditionf(st, gen, ConditionRequestsGranted, metav1.ConditionTrue, ReasonNoneDenied,
			"no AccessRequest or ClusterRequest of the provider is denied")
		return nil
	}
	msgs := make([]string, 0, min(len(denied), maxDeniedInMessage)+1)
	for i, d := range denied {
		if i == maxDeniedInMessage {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(denied)-i))
			break
		}
		msgs = append(msgs, d.String())
	}
	logf.FromContext(ctx).V(1).Info("Requests of the provider are denied", "denied", len(denied))
	setConditionf(st, gen, ConditionRequestsGranted, metav1.ConditionFalse, ReasonRequestDenied, "%s", strings.Join(msgs, "; "))
	return nil
}

// enqueueRequester maps a request to the provider of this kind it belongs
// to: the provider that controls its namespace, or, for ServiceProviders,
// the one its managed-by label names.
func (r *Reconciler[T]) enqueueRequester(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		if owner := o.GetLabels()[providerv1alpha1.ManagedByLabel]; owner != "" && owner != ManagedByValue && r.kind.Name == policy.KindServiceProvider {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: owner}})
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: o.GetNamespace()}, ns); err != nil {
			return reqs
		}
		if ref := metav1.GetControllerOf(ns); ref != nil && ns.Labels[LabelProviderKind] == r.kind.Name && ref.Kind == r.kind.Name {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: ref.Name}})
		}
		return reqs
	}
}

// requestPhaseChanged passes the events of a request that can change
// RequestsGranted: it appears, goes, or its phase changes.
var requestPhaseChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool { return requestPhase(e.ObjectOld) != requestPhase(e.ObjectNew) },
}

func requestPhase(o client.Object) string {
	switch o := o.(type) {
	case *clustersv1alpha1.AccessRequest:
		return o.Status.Phase
	case *clustersv1alpha1.ClusterRequest:
		return o.Status.Phase
	}
	return ""
}
