package clusters

import (
	"cmp"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
)

// DefaultTenancies maps purposes to the tenancy their requests get; a
// purpose not listed is Shared. An MCP is a tenant's own control plane and
// gets a cluster of its own.
func DefaultTenancies() map[string]clustersv1alpha1.Tenancy {
	return map[string]clustersv1alpha1.Tenancy{clustersv1alpha1.PurposeMCP: clustersv1alpha1.TenancyExclusive}
}

// IsReady reports whether the Cluster's Ready condition is True.
func IsReady(c *clustersv1alpha1.Cluster) bool {
	return apimeta.IsStatusConditionTrue(c.Status.Conditions, common.ConditionTypeReady)
}

// fits reports whether c can be given to a request of purpose and tenancy:
// it serves the purpose, has the tenancy, is Ready and is not being deleted.
func fits(c *clustersv1alpha1.Cluster, purpose string, tenancy clustersv1alpha1.Tenancy) bool {
	return c.DeletionTimestamp.IsZero() &&
		c.Spec.Tenancy == tenancy &&
		slices.Contains(c.Spec.Purposes, purpose) &&
		IsReady(c)
}

// waitFor returns a cluster that would fit a request of purpose and
// tenancy but for its Ready condition, or nil: the request waits for it.
func waitFor(list []clustersv1alpha1.Cluster, purpose string, tenancy clustersv1alpha1.Tenancy) *clustersv1alpha1.Cluster {
	for i := range list {
		c := &list[i]
		if c.DeletionTimestamp.IsZero() && c.Spec.Tenancy == tenancy && slices.Contains(c.Spec.Purposes, purpose) && !IsReady(c) &&
			(tenancy != clustersv1alpha1.TenancyExclusive || len(c.RequestUIDs()) == 0) {
			return c
		}
	}
	return nil
}

// choose picks the cluster for a new request of purpose and tenancy, or nil.
// Shared: the fitting cluster with the fewest tenants. Exclusive: a fitting
// cluster with no tenant. Ties go to the first by namespace and name, so the
// choice is deterministic.
func choose(list []clustersv1alpha1.Cluster, purpose string, tenancy clustersv1alpha1.Tenancy) *clustersv1alpha1.Cluster {
	var best *clustersv1alpha1.Cluster
	bestTenants := 0
	for i := range list {
		c := &list[i]
		if !fits(c, purpose, tenancy) {
			continue
		}
		tenants := len(c.RequestUIDs())
		if tenancy == clustersv1alpha1.TenancyExclusive && tenants > 0 {
			continue
		}
		if best == nil || tenants < bestTenants || (tenants == bestTenants && less(c, best)) {
			best, bestTenants = c, tenants
		}
	}
	return best
}

func less(a, b *clustersv1alpha1.Cluster) bool {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name)) < 0
}

// clusterWithFinalizer returns the cluster that carries finalizer, or nil.
func clusterWithFinalizer(list []clustersv1alpha1.Cluster, finalizer string) *clustersv1alpha1.Cluster {
	for i := range list {
		if slices.Contains(list[i].Finalizers, finalizer) {
			return &list[i]
		}
	}
	return nil
}
