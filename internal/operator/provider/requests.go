package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
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

// deniedRequest is one Denied request of a provider.
type deniedRequest struct {
	kind, namespace, name, reason, message string
}

func (d deniedRequest) String() string {
	s := fmt.Sprintf("%s %s/%s Denied", d.kind, d.namespace, d.name)
	if d.reason != "" {
		s += " (" + d.reason + ")"
	}
	if d.message != "" {
		s += ": " + d.message
	}
	return s
}

// setRequestsGranted records on st whether a request of obj, whose
// namespace is namespace, is Denied.
func (r *Reconciler[T]) setRequestsGranted(ctx context.Context, st *providerv1alpha1.DeploymentStatus, obj T, namespace string) error {
	denied, err := deniedRequests(ctx, r.client, r.kind.Name, obj.GetName(), namespace)
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

// DeniedRequests describes the Denied requests of the provider of kind
// (policy.KindServiceProvider, …) and name, as RequestsGranted names them:
// "AccessRequest <namespace>/<name> Denied (<reason>): <message>", sorted.
// c reads the platform cluster.
func DeniedRequests(ctx context.Context, c client.Reader, kind, name string) ([]string, error) {
	namespace, _, ok := RunServiceAccount(kind, name)
	if !ok {
		return nil, fmt.Errorf("no provider kind %q", kind)
	}
	denied, err := deniedRequests(ctx, c, kind, name, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(denied))
	for i, d := range denied {
		out[i] = d.String()
	}
	return out, nil
}

// deniedRequests lists the Denied requests of the provider of kind and
// name whose namespace is namespace, sorted by kind, namespace and name.
func deniedRequests(ctx context.Context, c client.Reader, kind, name, namespace string) ([]deniedRequest, error) {
	selectors := []client.ListOption{client.InNamespace(namespace)}
	if kind == policy.KindServiceProvider {
		selectors = append(selectors, client.MatchingLabels{providerv1alpha1.ManagedByLabel: name})
	}
	mcpNamespace := map[string]bool{}
	// inScope: a request in the provider's namespace, or labelled with its
	// name in an MCP's platform namespace. Another provider's request
	// labelled with this name elsewhere is none of this provider's.
	inScope := func(o client.Object) (bool, error) {
		ns := o.GetNamespace()
		if ns == namespace {
			return true, nil
		}
		ok, seen := mcpNamespace[ns]
		if !seen {
			n := &corev1.Namespace{}
			if err := c.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			_, ok = policy.MCPOfNamespace(n)
			mcpNamespace[ns] = ok
		}
		return ok, nil
	}
	var out []deniedRequest
	// add records o when it is Denied and in scope; only denied requests
	// cost a look at their namespace.
	add := func(kind string, o client.Object, st common.Status) error {
		if st.Phase != clustersv1alpha1.RequestDenied {
			return nil
		}
		if ok, err := inScope(o); err != nil || !ok {
			if err != nil {
				return fmt.Errorf("get namespace of %s %s/%s: %w", kind, o.GetNamespace(), o.GetName(), err)
			}
			return nil
		}
		d := deniedRequest{kind: kind, namespace: o.GetNamespace(), name: o.GetName()}
		if c := apimeta.FindStatusCondition(st.Conditions, common.ConditionTypeReady); c != nil {
			d.reason, d.message = c.Reason, c.Message
		}
		out = append(out, d)
		return nil
	}
	for _, sel := range selectors {
		ars := &clustersv1alpha1.AccessRequestList{}
		if err := c.List(ctx, ars, sel); err != nil {
			return nil, fmt.Errorf("list AccessRequests: %w", err)
		}
		for i := range ars.Items {
			if err := add("AccessRequest", &ars.Items[i], ars.Items[i].Status.Status); err != nil {
				return nil, err
			}
		}
		crs := &clustersv1alpha1.ClusterRequestList{}
		if err := c.List(ctx, crs, sel); err != nil {
			return nil, fmt.Errorf("list ClusterRequests: %w", err)
		}
		for i := range crs.Items {
			if err := add("ClusterRequest", &crs.Items[i], crs.Items[i].Status.Status); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(out, func(a, b deniedRequest) int {
		return strings.Compare(a.kind+"/"+a.namespace+"/"+a.name, b.kind+"/"+b.namespace+"/"+b.name)
	})
	return slices.CompactFunc(out, func(a, b deniedRequest) bool {
		return a.kind == b.kind && a.namespace == b.namespace && a.name == b.name
	}), nil
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
