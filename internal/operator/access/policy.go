package access

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// deny revokes whatever was granted to a request the access policy does
// not allow (its spec or the provider's policy may have changed since) and
// reports the violation.
func (r *Reconciler) deny(ctx context.Context, ar *clustersv1alpha1.AccessRequest, v *policy.Violation) (*outcome, error) {
	if o, err := r.revoke(ctx, ar); o != nil || err != nil {
		return o, err
	}
	ar.Status.SecretRef = nil
	logf.FromContext(ctx).V(1).Info("Denied by the access policy", "rule", v.Rule)
	return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonPolicyViolation, message: v.Error()}, nil
}

// policyError reports a policy check that could not be made (the platform
// or onboarding cluster did not answer); it is retried with backoff and
// nothing is granted meanwhile.
func policyError(err error) *outcome {
	return &outcome{reason: ReasonPolicyCheckFailed, message: err.Error(), retry: true}
}

// requestsForProvider returns the AccessRequests of a provider whose spec
// (spec.accessPolicy) or status.resources changed: those in its namespace
// and, for a ServiceProvider, those labelled with its name in its tenants'
// MCP namespaces (and those naming it before it existed). Each is checked
// again.
func (r *Reconciler) requestsForProvider(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		namespaces := policy.WatchedNamespaces(ctx, r.client, kind, obj)
		return r.matching(ctx, func(ar *clustersv1alpha1.AccessRequest) bool {
			return slices.Contains(namespaces, ar.Namespace) ||
				(kind == policy.KindServiceProvider && ar.Labels[providerv1alpha1.ManagedByLabel] == obj.GetName())
		})
	}
}
