package access

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// onboardingFromClusters returns the onboarding cluster as the policy sees
// it: the first Cluster (by namespace and name) with purpose onboarding,
// through its admin kubeconfig. The policy reads only object metadata
// there, to find a provider's tenants. The client is kept while the
// kubeconfig stays the same: a new one per check would discover the API
// server's resources again on every reconcile of an MCP access.
func onboardingFromClusters(c client.Reader) policy.OnboardingSource {
	var mu sync.Mutex
	var lastKey string
	var last client.Client
	return func(ctx context.Context) (client.Reader, error) {
		list := &clustersv1alpha1.ClusterList{}
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("list Clusters: %w", err)
		}
		slices.SortFunc(list.Items, func(a, b clustersv1alpha1.Cluster) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
		for i := range list.Items {
			cl := &list.Items[i]
			if !slices.Contains(cl.Spec.Purposes, clustersv1alpha1.PurposeOnboarding) {
				continue
			}
			cfg, err := clusters.AdminConfig(ctx, c, cl)
			if err != nil {
				return nil, err
			}
			key := configKey(cfg)
			mu.Lock()
			defer mu.Unlock()
			if key == lastKey {
				return last, nil
			}
			cfg = rest.CopyConfig(cfg)
			cfg.Timeout = TargetTimeout
			oc, err := client.New(cfg, client.Options{})
			if err != nil {
				return nil, fmt.Errorf("client for onboarding Cluster %s/%s: %w", cl.Namespace, cl.Name, err)
			}
			lastKey, last = key, oc
			return oc, nil
		}
		return nil, nil
	}
}

// configKey identifies what a client made from cfg would connect to and
// authenticate with.
func configKey(cfg *rest.Config) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(cfg.Host), cfg.CAData, cfg.CertData, cfg.KeyData, []byte(cfg.BearerToken), []byte(cfg.BearerTokenFile),
		[]byte(cfg.Username), []byte(cfg.Password), []byte(cfg.ServerName), []byte(fmt.Sprint(cfg.Insecure))} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// deny revokes whatever was granted to a request the access policy does
// not allow (its spec or the provider's policy may have changed since) and
// reports the violation.
func (r *Reconciler) deny(ctx context.Context, ar *clustersv1alpha1.AccessRequest, v *policy.Violation) (*outcome, error) {
	if o, err := r.revoke(ctx, ar); o != nil || err != nil {
		return o, err
	}
	ar.Status.SecretRef = nil
	logf.FromContext(ctx).V(1).Info("denied by the access policy", "rule", v.Rule)
	return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonPolicyViolation, message: v.Error()}, nil
}

// policyError reports a policy check that could not be made (the platform
// or onboarding cluster did not answer); it is retried with backoff and
// nothing is granted meanwhile.
func policyError(err error) *outcome {
	return &outcome{reason: ReasonPolicyCheckFailed, message: err.Error(), retry: true}
}

// requestsForProvider returns the AccessRequests in the namespace of a
// provider whose spec (spec.accessPolicy) changed: each is checked again.
func (r *Reconciler) requestsForProvider(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		namespaces := policy.WatchedNamespaces(ctx, r.client, kind, obj)
		return r.matching(ctx, func(ar *clustersv1alpha1.AccessRequest) bool {
			return slices.Contains(namespaces, ar.Namespace)
		})
	}
}
