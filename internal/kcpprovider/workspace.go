package kcpprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

// errWorkspaceConflict: a Workspace of the Cluster's name serves another
// Cluster, or was not made by this provider.
var errWorkspaceConflict = errors.New("workspace belongs to another cluster")

// WorkspaceName returns the name of the Workspace of the Cluster with uid:
// WorkspacePrefix and a hash of the UID, never a name a user chose.
func WorkspaceName(uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return WorkspacePrefix + hex.EncodeToString(sum[:8])
}

// workspace is what the provider reads of a kcp Workspace.
type workspace struct {
	obj *unstructured.Unstructured
	// Phase is status.phase, e.g. Ready.
	Phase string
	// URL is spec.URL, where the workspace is served.
	URL string
	// LogicalCluster is spec.cluster, the logical cluster's ID; it changes
	// when the workspace is created again.
	LogicalCluster string
}

// ensureWorkspace gets the Cluster's Workspace, creating it when missing.
// A Workspace of that name that is not labelled with the Cluster's UID
// wraps errWorkspaceConflict.
func (r *Reconciler) ensureWorkspace(ctx context.Context, cluster *clustersv1alpha1.Cluster) (*workspace, error) {
	name := WorkspaceName(string(cluster.UID))
	ws, err := r.getWorkspace(ctx, cluster)
	if err != nil || ws != nil {
		return ws, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(WorkspaceGVR.GroupVersion().String())
	obj.SetKind("Workspace")
	obj.SetName(name)
	obj.SetLabels(map[string]string{
		ClusterUIDLabel:                string(cluster.UID),
		clustersv1alpha1.ProviderLabel: r.providerName,
	})
	obj.SetAnnotations(map[string]string{ClusterAnnotation: cluster.Namespace + "/" + cluster.Name})
	created, err := r.workspaces.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Created meanwhile: look at it again, with the same check.
		return r.getWorkspace(ctx, cluster)
	}
	if err != nil {
		return nil, fmt.Errorf("create Workspace %s in kcp: %w", name, err)
	}
	r.recorder.Eventf(cluster, nil, corev1.EventTypeNormal, string(ReasonWorkspaceCreated), "CreateWorkspace",
		"created kcp workspace %s:%s", r.parentPath, name)
	return readWorkspace(created), nil
}

// getWorkspace returns the Cluster's Workspace, nil when there is none. One
// that is not labelled with the Cluster's UID wraps errWorkspaceConflict.
func (r *Reconciler) getWorkspace(ctx context.Context, cluster *clustersv1alpha1.Cluster) (*workspace, error) {
	name := WorkspaceName(string(cluster.UID))
	obj, err := r.workspaces.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Workspace %s from kcp: %w", name, err)
	}
	if owner := obj.GetLabels()[ClusterUIDLabel]; owner != string(cluster.UID) {
		return nil, fmt.Errorf("%w: Workspace %s:%s exists with label %s=%q, not this Cluster's UID; it is not adopted",
			errWorkspaceConflict, r.parentPath, name, ClusterUIDLabel, owner)
	}
	return readWorkspace(obj), nil
}

func readWorkspace(obj *unstructured.Unstructured) *workspace {
	ws := &workspace{obj: obj}
	ws.Phase, _, _ = unstructured.NestedString(obj.Object, "status", "phase")
	ws.URL, _, _ = unstructured.NestedString(obj.Object, "spec", "URL")
	ws.LogicalCluster, _, _ = unstructured.NestedString(obj.Object, "spec", "cluster")
	return ws
}

// deleteWorkspace deletes the Cluster's Workspace and reports whether it
// is gone. A Workspace of another Cluster counts as gone: it is never
// deleted.
func (r *Reconciler) deleteWorkspace(ctx context.Context, cluster *clustersv1alpha1.Cluster) (bool, error) {
	ws, err := r.getWorkspace(ctx, cluster)
	switch {
	case errors.Is(err, errWorkspaceConflict):
		return true, nil
	case err != nil:
		return false, err
	case ws == nil:
		return true, nil
	}
	if ws.obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	uid := ws.obj.GetUID()
	err = r.workspaces.Delete(ctx, ws.obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete Workspace %s from kcp: %w", ws.obj.GetName(), err)
	}
	return false, nil
}
