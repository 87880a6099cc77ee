package clusters

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// offboardingCondition returns the Offboarding condition of a cluster that
// is cordoned or being deleted: the drain report, how many instances are
// still there and the first few of them. A cluster that is neither has no
// such condition (ok is false).
func offboardingCondition(sfc *resourcev1alpha1.SFCluster, l load) (metav1.Condition, bool) {
	c := metav1.Condition{Type: resourcev1alpha1.SFClusterConditionOffboarding, Status: metav1.ConditionTrue}
	n := len(l.instances)
	switch {
	case sfc.DeletionTimestamp != nil && n == 0:
		// Only the components are left to remove (components.go).
		c.Reason = resourcev1alpha1.SFClusterReasonDeletionBlocked
		c.Message = "the deletion waits for the components to be removed from the cluster"
	case sfc.DeletionTimestamp != nil:
		c.Reason = resourcev1alpha1.SFClusterReasonDeletionBlocked
		c.Message = fmt.Sprintf("the deletion waits for %s still on the cluster: %s", instances(n), joinNames(l.instances))
	case !sfc.Spec.Unschedulable:
		return c, false
	case n == 0:
		c.Reason = resourcev1alpha1.SFClusterReasonDrained
		c.Message = "cordoned, no instance left: the SFCluster can be deleted"
	default:
		c.Reason = resourcev1alpha1.SFClusterReasonCordoned
		c.Message = fmt.Sprintf("cordoned, %s still on the cluster: %s", instances(n), joinNames(l.instances))
	}
	return c, true
}

// instances says "1 instance" or "n instances".
func instances(n int) string {
	if n == 1 {
		return "1 instance"
	}
	return fmt.Sprintf("%d instances", n)
}

// offboard completes the deletion of an SFCluster that no instance runs on
// any more: it removes the finalizer and forgets the cluster's client.
func (r *StatusReconciler) offboard(ctx context.Context, sfc *resourcev1alpha1.SFCluster) error {
	if err := r.patchFinalizer(ctx, sfc, controllerutil.RemoveFinalizer); err != nil {
		return err
	}
	r.registry.Forget(sfc.Namespace, sfc.Name)
	r.recorder.Eventf(sfc, nil, corev1.EventTypeNormal, "Offboarded", "Offboard", "no instance is left on the cluster; the SFCluster is deleted")
	logf.FromContext(ctx).Info("SFCluster offboarded", "sfcluster", sfc.Name)
	return nil
}
