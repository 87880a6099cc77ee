package clusteraccess

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// labels returns the labels of a request the Manager creates for purpose,
// plus extra.
func (m *Manager) labels(purpose string, extra map[string]string) map[string]string {
	l := map[string]string{
		providerv1alpha1.ManagedByLabel:      labelValue(m.provider),
		providerv1alpha1.ManagedPurposeLabel: labelValue(purpose),
	}
	maps.Copy(l, extra)
	return l
}

// ensureClusterRequest creates the ClusterRequest key of purpose unless it
// exists, and returns it. The spec of a ClusterRequest cannot change, so an
// existing request of another purpose is an error.
func (m *Manager) ensureClusterRequest(ctx context.Context, key types.NamespacedName, purpose string) (*clustersv1alpha1.ClusterRequest, error) {
	cr := &clustersv1alpha1.ClusterRequest{}
	err := m.reader.Get(ctx, key, cr)
	switch {
	case apierrors.IsNotFound(err):
		cr = &clustersv1alpha1.ClusterRequest{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: m.labels(purpose, nil)},
			Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: purpose},
		}
		if err := m.platform.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create ClusterRequest %s: %w", key, err)
		}
		logf.FromContext(ctx).V(1).Info("Created ClusterRequest", "clusterRequest", key, "purpose", purpose)
		return cr, nil
	case err != nil:
		return nil, fmt.Errorf("get ClusterRequest %s: %w", key, err)
	case cr.Spec.Purpose != purpose:
		return nil, fmt.Errorf("ClusterRequest %s exists with purpose %q, not %q; delete it to request another purpose", key, cr.Spec.Purpose, purpose)
	}
	return cr, nil
}

// ensureAccessRequest creates want unless it exists; an existing request
// gets want's labels, token and TTL (its reference cannot change). It
// returns the request as it is now.
func (m *Manager) ensureAccessRequest(ctx context.Context, want *clustersv1alpha1.AccessRequest) (*clustersv1alpha1.AccessRequest, error) {
	key := client.ObjectKeyFromObject(want)
	ar := &clustersv1alpha1.AccessRequest{}
	err := m.reader.Get(ctx, key, ar)
	switch {
	case apierrors.IsNotFound(err):
		if err := m.platform.Create(ctx, want); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Created concurrently (or the reader lags): it is new,
				// hence not granted yet.
				return want, nil
			}
			return nil, fmt.Errorf("create AccessRequest %s: %w", key, err)
		}
		logf.FromContext(ctx).V(1).Info("Created AccessRequest", "accessRequest", key)
		return want, nil
	case err != nil:
		return nil, fmt.Errorf("get AccessRequest %s: %w", key, err)
	case !ar.DeletionTimestamp.IsZero():
		return ar, nil
	}
	if !equality.Semantic.DeepEqual(ar.Spec.RequestRef, want.Spec.RequestRef) || !equality.Semantic.DeepEqual(ar.Spec.ClusterRef, want.Spec.ClusterRef) {
		return nil, fmt.Errorf("AccessRequest %s refers to another cluster than expected; delete it to have it created anew", key)
	}
	update := ar.DeepCopy()
	if update.Labels == nil {
		update.Labels = map[string]string{}
	}
	maps.Copy(update.Labels, want.Labels)
	update.Spec.Token, update.Spec.OIDC, update.Spec.TTL = want.Spec.Token, nil, want.Spec.TTL
	if equality.Semantic.DeepEqual(ar.Labels, update.Labels) && equality.Semantic.DeepEqual(ar.Spec, update.Spec) {
		return ar, nil
	}
	if err := m.platform.Update(ctx, update); err != nil {
		return nil, fmt.Errorf("update AccessRequest %s to the requested permissions: %w", key, err)
	}
	logf.FromContext(ctx).V(1).Info("Updated AccessRequest", "accessRequest", key)
	return update, nil
}

// accessRequest returns the AccessRequest named key with the token access p
// to the cluster of the ClusterRequest ref.
func (m *Manager) accessRequest(key, ref types.NamespacedName, p Permissions, labels map[string]string) *clustersv1alpha1.AccessRequest {
	var ttl *common.Duration
	if m.ttl != nil {
		// A copy: the request must not share the Manager's value.
		v := *m.ttl
		ttl = &v
	}
	return &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: labels},
		Spec: clustersv1alpha1.AccessRequestSpec{
			RequestRef: &common.ObjectReference{Name: ref.Name, Namespace: ref.Namespace},
			Token:      p.token(),
			TTL:        ttl,
		},
	}
}

// grantedSecret returns the Secret of ar when ar is granted for its current
// spec. ok is false while it is pending (also while the operator has not
// seen a changed spec yet, or ar is being deleted); a denied request is an
// error wrapping ErrAccessDenied.
func grantedSecret(ar *clustersv1alpha1.AccessRequest) (secret types.NamespacedName, ok bool, err error) {
	switch {
	case !ar.DeletionTimestamp.IsZero():
		return types.NamespacedName{}, false, nil
	case ar.Status.ObservedGeneration != ar.Generation:
		return types.NamespacedName{}, false, nil
	case ar.Status.IsDenied():
		return types.NamespacedName{}, false, fmt.Errorf("%w: AccessRequest %s/%s was denied%s", ErrAccessDenied, ar.Namespace, ar.Name, readyReason(ar.Status.Conditions))
	case !ar.Status.IsGranted() || ar.Status.SecretRef == nil:
		return types.NamespacedName{}, false, nil
	}
	secret = types.NamespacedName{Namespace: ar.Status.SecretRef.Namespace, Name: ar.Status.SecretRef.Name}
	if secret.Namespace == "" {
		secret.Namespace = ar.Namespace
	}
	return secret, true, nil
}

// clusterRequestDenied returns an error wrapping ErrAccessDenied when cr is
// denied.
func clusterRequestDenied(cr *clustersv1alpha1.ClusterRequest, what string) error {
	if !cr.Status.IsDenied() {
		return nil
	}
	return fmt.Errorf("%w: %s: ClusterRequest %s/%s was denied%s", ErrAccessDenied, what, cr.Namespace, cr.Name, readyReason(cr.Status.Conditions))
}

// readyReason returns ": <reason>: <message>" of the Ready condition, or
// nothing when there is none.
func readyReason(conditions []metav1.Condition) string {
	c := apimeta.FindStatusCondition(conditions, common.ConditionTypeReady)
	if c == nil {
		return ""
	}
	return fmt.Sprintf(": %s: %s", c.Reason, c.Message)
}

// describe says where ar stands, for messages about waiting.
func describe(ar *clustersv1alpha1.AccessRequest) string {
	phase := ar.Status.Phase
	if phase == "" {
		phase = clustersv1alpha1.RequestPending
	}
	s := fmt.Sprintf("AccessRequest %s/%s is %s", ar.Namespace, ar.Name, phase)
	if ar.Status.ObservedGeneration != ar.Generation {
		s += " (the operator has not processed its current spec yet)"
	}
	if c := apimeta.FindStatusCondition(ar.Status.Conditions, common.ConditionTypeReady); c != nil {
		s += fmt.Sprintf(", Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return s
}
