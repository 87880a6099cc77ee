package mcp

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// clusterPurpose is the purpose of the MCP's ClusterRequest: the value of
// the purpose-override label, else of openMCP's purpose label, else "mcp".
func clusterPurpose(m object) string {
	for _, l := range []string{corev2alpha1.MCPPurposeOverrideLabel, corev2alpha1.MCPPurposeLabel} {
		if p := m.GetLabels()[l]; p != "" {
			return p
		}
	}
	return corev2alpha1.DefaultMCPClusterPurpose
}

// reconcileClusterRequest creates the MCP's ClusterRequest, sets
// ClusterRequestReady from its phase and, once it is granted, the endpoints
// and the Cluster.* conditions from the granted Cluster. The request lives in
// the MCP's platform namespace platformNS. It returns the ClusterRequest.
func (r *Reconciler) reconcileClusterRequest(ctx context.Context, m object, platformNS string) (*clustersv1alpha1.ClusterRequest, error) {
	key := types.NamespacedName{Namespace: platformNS, Name: m.GetName()}
	cr := &clustersv1alpha1.ClusterRequest{}
	err := r.platform.GetClient().Get(ctx, key, cr)
	if apierrors.IsNotFound(err) {
		// The spec of a ClusterRequest is immutable, so an existing one is
		// never updated: the purpose is fixed when the MCP is created, as
		// the purpose labels document.
		cr = &clustersv1alpha1.ClusterRequest{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: mcpLabels(m.GetNamespace(), m.GetName())},
			Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clusterPurpose(m)},
		}
		switch err := r.platform.GetClient().Create(ctx, cr); {
		case apierrors.IsAlreadyExists(err):
			// The cache has not seen it yet; its watch event brings the
			// MCP back. Until then it counts as pending.
		case err != nil:
			return nil, fmt.Errorf("create ClusterRequest %s: %w", key, err)
		default:
			logf.FromContext(ctx).V(1).Info("Created ClusterRequest", "clusterRequest", key, "purpose", cr.Spec.Purpose)
		}
	} else if err != nil {
		return nil, fmt.Errorf("get ClusterRequest %s: %w", key, err)
	}

	switch {
	case cr.Status.IsGranted() && cr.Status.Cluster != nil:
		setCondition(m, corev2alpha1.ConditionClusterRequestReady, metav1.ConditionTrue, ReasonClusterRequestGranted,
			fmt.Sprintf("ClusterRequest %s was granted cluster %s.", key, cr.Status.Cluster.NamespacedName()))
		if err := r.observeCluster(ctx, m, cr.Status.Cluster.NamespacedName()); err != nil {
			return nil, err
		}
	case cr.Status.IsDenied():
		reason := string(ReasonClusterRequestDenied)
		msg := fmt.Sprintf("ClusterRequest %s was denied.", key)
		if c := apimeta.FindStatusCondition(cr.Status.Conditions, common.ConditionTypeReady); c != nil {
			if c.Reason != "" {
				// The API server validated it as a condition reason.
				reason = c.Reason
			}
			msg = fmt.Sprintf("ClusterRequest %s was denied: %s: %s", key, c.Reason, c.Message)
		}
		setRawCondition(m, corev2alpha1.ConditionClusterRequestReady, metav1.ConditionFalse, reason, msg)
		m.ControlPlaneStatus().Endpoints = nil
		removeConditions(m, corev2alpha1.ConditionPrefixCluster, nil)
	default:
		setCondition(m, corev2alpha1.ConditionClusterRequestReady, metav1.ConditionFalse, ReasonClusterRequestPending,
			fmt.Sprintf("ClusterRequest %s is pending.", key))
		m.ControlPlaneStatus().Endpoints = nil
		removeConditions(m, corev2alpha1.ConditionPrefixCluster, nil)
	}
	return cr, nil
}

// observeCluster copies the endpoints of the granted Cluster into the MCP's
// status and mirrors its conditions as Cluster.<type>.
func (r *Reconciler) observeCluster(ctx context.Context, m object, key types.NamespacedName) error {
	c := &clustersv1alpha1.Cluster{}
	if err := r.platform.GetClient().Get(ctx, key, c); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get Cluster %s: %w", key, err)
		}
		// The Cluster watch brings the MCP back when it appears.
		m.ControlPlaneStatus().Endpoints = nil
		removeConditions(m, corev2alpha1.ConditionPrefixCluster, nil)
		return nil
	}
	m.ControlPlaneStatus().Endpoints = append([]clustersv1alpha1.Endpoint(nil), c.Status.Endpoints...)
	keep := map[string]bool{}
	for _, cc := range c.Status.Conditions {
		typ := corev2alpha1.ConditionPrefixCluster + cc.Type
		keep[typ] = true
		setRawCondition(m, typ, cc.Status, cc.Reason, cc.Message)
	}
	removeConditions(m, corev2alpha1.ConditionPrefixCluster, keep)
	return nil
}
