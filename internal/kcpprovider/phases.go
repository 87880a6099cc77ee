package kcpprovider

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
)

// ensure brings a Cluster that is not being deleted up to date: finalizer,
// labels and annotations, Workspace, and a kubeconfig Secret with a token
// that is not due for renewal. It requeues for the renewal.
func (r *Reconciler) ensure(ctx context.Context, cluster *clustersv1alpha1.Cluster) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	path := r.parentPath + ":" + WorkspaceName(string(cluster.UID))
	if err := r.mark(ctx, cluster, path); err != nil {
		return ctrl.Result{}, err
	}
	ws, err := r.ensureWorkspace(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ws.Phase != "Ready" || ws.URL == "" {
		log.V(1).Info("Workspace not ready yet", "workspace", path, "phase", ws.Phase)
		return ctrl.Result{RequeueAfter: r.workspaceWait}, nil
	}
	secret, err := r.getSecret(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.now()
	if at, ok := renewAt(secret, path, ws); ok && now.Before(at) {
		log.V(2).Info("Kubeconfig current", "workspace", path, "renewAt", at)
		return ctrl.Result{RequeueAfter: at.Sub(now)}, nil
	}
	tok, err := r.issueToken(ctx, ws.URL)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.writeSecret(ctx, cluster, secret, path, ws, tok); err != nil {
		return ctrl.Result{}, err
	}
	r.recorder.Eventf(cluster, nil, corev1.EventTypeNormal, string(ReasonKubeconfigIssued), "IssueKubeconfig",
		"wrote Secret %s with a token for workspace %s valid until %s", SecretName(cluster), path, tok.expires.UTC().Format(time.RFC3339))
	log.Info("Issued kubeconfig", "workspace", path, "secret", SecretName(cluster), "expires", tok.expires)
	at := tok.issued.Add(time.Duration(float64(tok.expires.Sub(tok.issued)) * RenewFraction))
	return ctrl.Result{RequeueAfter: max(at.Sub(r.now()), time.Second)}, nil
}

// mark puts the finalizer, the provider label and the provider's
// annotations on the Cluster, writing only what changed.
func (r *Reconciler) mark(ctx context.Context, cluster *clustersv1alpha1.Cluster, path string) error {
	before := cluster.DeepCopy()
	finalizerAdded := controllerutil.AddFinalizer(cluster, Finalizer)
	if cluster.Labels == nil {
		cluster.Labels = map[string]string{}
	}
	cluster.Labels[clustersv1alpha1.ProviderLabel] = r.providerName
	if cluster.Annotations == nil {
		cluster.Annotations = map[string]string{}
	}
	maps.Copy(cluster.Annotations, map[string]string{
		BackendAnnotation:                       Backend,
		WorkloadsAnnotation:                     WorkloadsNone,
		WorkspaceAnnotation:                     path,
		clusters.KubeconfigSecretAnnotation:     SecretName(cluster),
		clustersv1alpha1.ProviderInfoAnnotation: "kcp workspace " + path,
	})
	if !finalizerAdded && maps.Equal(before.Labels, cluster.Labels) && maps.Equal(before.Annotations, cluster.Annotations) {
		return nil
	}
	// The finalizer list is replaced as a whole: lock on the version read.
	if err := r.platform.Patch(ctx, cluster, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("mark Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	return nil
}

// finalize removes what a Cluster being deleted has: once no request holds
// it any more, its Workspace (waiting until kcp has removed it), then its
// Secret, then the finalizer.
func (r *Reconciler) finalize(ctx context.Context, cluster *clustersv1alpha1.Cluster) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	if !controllerutil.ContainsFinalizer(cluster, Finalizer) {
		return ctrl.Result{}, nil
	}
	if uids := cluster.RequestUIDs(); len(uids) > 0 {
		// Tenants still use the workspace; removing a request finalizer
		// brings the Cluster back here.
		log.V(1).Info("Cluster still held by requests", "requests", len(uids))
		return ctrl.Result{}, nil
	}
	gone, err := r.deleteWorkspace(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !gone {
		log.V(1).Info("Waiting for the workspace to go", "workspace", cluster.Annotations[WorkspaceAnnotation])
		return ctrl.Result{RequeueAfter: r.workspaceWait}, nil
	}
	if err := r.deleteSecret(ctx, cluster); err != nil {
		return ctrl.Result{}, err
	}
	before := cluster.DeepCopy()
	controllerutil.RemoveFinalizer(cluster, Finalizer)
	if err := r.platform.Patch(ctx, cluster, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer from Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	r.recorder.Eventf(cluster, nil, corev1.EventTypeNormal, string(ReasonWorkspaceDeleted), "DeleteWorkspace",
		"deleted kcp workspace %s and Secret %s", cluster.Annotations[WorkspaceAnnotation], SecretName(cluster))
	log.Info("Released Cluster", "workspace", cluster.Annotations[WorkspaceAnnotation])
	return ctrl.Result{}, nil
}
