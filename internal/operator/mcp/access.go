package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// accessState is the outcome of reconciling one requested access: the
// AccessReady.<name> condition and, when ready, the Secret to publish.
type accessState struct {
	ready   bool
	reason  Reason
	message string
	secret  string
}

// reconcileAccess makes one AccessRequest per token of spec.iam.tokens,
// copies each granted kubeconfig to the onboarding cluster, publishes it in
// status.access, sets the AccessReady.<name> conditions and removes the
// AccessRequests and Secrets of tokens that are no longer in the spec.
func (r *Reconciler) reconcileAccess(ctx context.Context, m object, cr *clustersv1alpha1.ClusterRequest) error {
	wanted := map[string]bool{}
	conditions := map[string]bool{}
	access := map[string]common.LocalObjectReference{}
	var errs []error
	for _, t := range m.ControlPlaneSpec().IAM.Tokens {
		wanted[t.Name] = true
		st, err := r.reconcileToken(ctx, m, cr, t)
		if err != nil {
			errs = append(errs, fmt.Errorf("token %q: %w", t.Name, err))
			continue
		}
		typ := corev2alpha1.ConditionPrefixAccessReady + t.Name
		conditions[typ] = true
		if st.ready {
			access[t.Name] = common.LocalObjectReference{Name: st.secret}
			setCondition(m, typ, metav1.ConditionTrue, st.reason, st.message)
		} else {
			setCondition(m, typ, metav1.ConditionFalse, st.reason, st.message)
		}
	}
	// Static (token) clusters cannot issue OIDC access. Saying so on a
	// condition is all that can be done: nothing would change by retrying,
	// so there is no requeue.
	for _, p := range oidcProviders(m) {
		typ := corev2alpha1.ConditionPrefixAccessReady + p
		conditions[typ] = true
		setCondition(m, typ, metav1.ConditionFalse, ReasonOIDCNotSupported,
			fmt.Sprintf("OIDC provider %q: OIDC access is not supported by Marketplane's cluster providers yet; use spec.iam.tokens.", p))
	}
	if len(errs) > 0 {
		// Keep the conditions and status.access entries of the tokens that
		// failed as they were; the error brings the MCP back with backoff.
		st := m.ControlPlaneStatus()
		if st.Access == nil && len(access) > 0 {
			st.Access = map[string]common.LocalObjectReference{}
		}
		maps.Copy(st.Access, access)
		return errors.Join(errs...)
	}
	removeConditions(m, corev2alpha1.ConditionPrefixAccessReady, conditions)
	if len(access) == 0 {
		access = nil
	}
	m.ControlPlaneStatus().Access = access

	if err := r.deleteStaleAccessRequests(ctx, m, wanted); err != nil {
		return err
	}
	return r.deleteStaleSecrets(ctx, m, wanted)
}

// oidcProviders returns the names of the OIDC providers spec.iam.oidc
// configures: "default" when the standard provider has role bindings, and
// every extra provider.
func oidcProviders(m object) []string {
	o := m.ControlPlaneSpec().IAM.OIDC
	if o == nil {
		return nil
	}
	var out []string
	if o.DefaultProvider != nil && len(o.DefaultProvider.RoleBindings) > 0 {
		out = append(out, corev2alpha1.DefaultOIDCProviderName)
	}
	for _, p := range o.ExtraProviders {
		out = append(out, p.Name)
	}
	return out
}

// reconcileToken ensures the AccessRequest of token t and, once it is
// granted, the copy of its kubeconfig on the onboarding cluster.
func (r *Reconciler) reconcileToken(ctx context.Context, m object, cr *clustersv1alpha1.ClusterRequest, t corev2alpha1.TokenConfig) (accessState, error) {
	ar, err := r.ensureAccessRequest(ctx, m, cr, t)
	if err != nil {
		return accessState{}, err
	}
	key := client.ObjectKeyFromObject(ar)
	switch {
	case !ar.DeletionTimestamp.IsZero():
		return accessState{reason: ReasonAccessRequestPending, message: fmt.Sprintf("AccessRequest %s is being deleted.", key)}, nil
	case ar.Status.IsDenied():
		msg := fmt.Sprintf("AccessRequest %s was denied.", key)
		if c := apimeta.FindStatusCondition(ar.Status.Conditions, common.ConditionTypeReady); c != nil {
			msg = fmt.Sprintf("AccessRequest %s was denied: %s: %s", key, c.Reason, c.Message)
		}
		return accessState{reason: ReasonAccessRequestDenied, message: msg}, nil
	case !ar.Status.IsGranted() || ar.Status.SecretRef == nil:
		return accessState{reason: ReasonAccessRequestPending, message: fmt.Sprintf("AccessRequest %s is pending.", key)}, nil
	}
	return r.copyKubeconfig(ctx, m, t.Name, ar)
}

// ensureAccessRequest creates or updates the AccessRequest of token t.
func (r *Reconciler) ensureAccessRequest(ctx context.Context, m object, cr *clustersv1alpha1.ClusterRequest, t corev2alpha1.TokenConfig) (*clustersv1alpha1.AccessRequest, error) {
	key := types.NamespacedName{Namespace: cr.Namespace, Name: accessRequestName(m.GetName(), t.Name)}
	labels := tokenLabels(m.GetNamespace(), m.GetName(), t.Name)
	token := t.TokenConfig.DeepCopy()

	pc := r.platform.GetClient()
	ar := &clustersv1alpha1.AccessRequest{}
	err := pc.Get(ctx, key, ar)
	if apierrors.IsNotFound(err) {
		ar = &clustersv1alpha1.AccessRequest{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: labels},
			Spec: clustersv1alpha1.AccessRequestSpec{
				RequestRef: &common.ObjectReference{Name: cr.Name, Namespace: cr.Namespace},
				Token:      token,
			},
		}
		switch err := pc.Create(ctx, ar); {
		case apierrors.IsAlreadyExists(err):
			// Not in the cache yet; its watch event brings the MCP back.
		case err != nil:
			return nil, fmt.Errorf("create AccessRequest %s: %w", key, err)
		default:
			logf.FromContext(ctx).V(1).Info("Created AccessRequest", "accessRequest", key)
		}
		return ar, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get AccessRequest %s: %w", key, err)
	}
	if !ar.DeletionTimestamp.IsZero() {
		return ar, nil
	}
	want := ar.DeepCopy()
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	maps.Copy(want.Labels, labels)
	want.Spec.Token = token
	if apiequality.Semantic.DeepEqual(ar.Labels, want.Labels) && apiequality.Semantic.DeepEqual(ar.Spec, want.Spec) {
		return ar, nil
	}
	if err := pc.Update(ctx, want); err != nil {
		return nil, fmt.Errorf("update AccessRequest %s: %w", key, err)
	}
	logf.FromContext(ctx).V(1).Info("Updated AccessRequest", "accessRequest", key)
	return want, nil
}

// copyKubeconfig copies the Secret of the granted AccessRequest ar to the
// onboarding cluster, as the MCP's kubeconfig Secret of token, and keeps the
// copy equal to the source (tokens are refreshed in the source).
func (r *Reconciler) copyKubeconfig(ctx context.Context, m object, token string, ar *clustersv1alpha1.AccessRequest) (accessState, error) {
	srcKey := types.NamespacedName{Namespace: ar.Status.SecretRef.Namespace, Name: ar.Status.SecretRef.Name}
	if srcKey.Namespace == "" {
		srcKey.Namespace = ar.Namespace
	}
	// Secrets are read directly from the API servers: the controller
	// watches only their metadata, so that the caches hold no credentials
	// of the whole cluster.
	src := &corev1.Secret{}
	if err := r.platform.GetAPIReader().Get(ctx, srcKey, src); err != nil {
		if apierrors.IsNotFound(err) {
			return accessState{reason: ReasonKubeconfigMissing, message: fmt.Sprintf("AccessRequest %s is granted but its Secret %s does not exist.", client.ObjectKeyFromObject(ar), srcKey)}, nil
		}
		return accessState{}, fmt.Errorf("get Secret %s of AccessRequest %s: %w", srcKey, client.ObjectKeyFromObject(ar), err)
	}
	if len(src.Data[clustersv1alpha1.SecretKeyKubeconfig]) == 0 {
		return accessState{reason: ReasonKubeconfigMissing, message: fmt.Sprintf("Secret %s of AccessRequest %s has no %q key.", srcKey, client.ObjectKeyFromObject(ar), clustersv1alpha1.SecretKeyKubeconfig)}, nil
	}

	dstKey := types.NamespacedName{Namespace: m.GetNamespace(), Name: kubeconfigSecretName(m.GetName(), token)}
	oc := r.onboarding.GetClient()
	dst := &corev1.Secret{}
	err := r.onboarding.GetAPIReader().Get(ctx, dstKey, dst)
	switch {
	case apierrors.IsNotFound(err):
		dst = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: dstKey.Name, Namespace: dstKey.Namespace, Labels: tokenLabels(m.GetNamespace(), m.GetName(), token)},
			Type:       corev1.SecretTypeOpaque,
			Data:       maps.Clone(src.Data),
		}
		if err := controllerutil.SetControllerReference(m, dst, r.onboarding.GetScheme()); err != nil {
			return accessState{}, fmt.Errorf("own Secret %s: %w", dstKey, err)
		}
		if err := oc.Create(ctx, dst); err != nil {
			return accessState{}, fmt.Errorf("create Secret %s: %w", dstKey, err)
		}
		logf.FromContext(ctx).V(1).Info("Copied kubeconfig", "token", token, "secret", dstKey)
	case err != nil:
		return accessState{}, fmt.Errorf("get Secret %s: %w", dstKey, err)
	case !metav1.IsControlledBy(dst, m):
		return accessState{reason: ReasonSecretConflict, message: fmt.Sprintf("Secret %s exists and does not belong to this %s; delete or rename it.", dstKey, kindOf(m))}, nil
	default:
		want := dst.DeepCopy()
		if want.Labels == nil {
			want.Labels = map[string]string{}
		}
		maps.Copy(want.Labels, tokenLabels(m.GetNamespace(), m.GetName(), token))
		want.Data = maps.Clone(src.Data)
		if !apiequality.Semantic.DeepEqual(dst.Labels, want.Labels) || !apiequality.Semantic.DeepEqual(dst.Data, want.Data) {
			if err := oc.Update(ctx, want); err != nil {
				return accessState{}, fmt.Errorf("update Secret %s: %w", dstKey, err)
			}
			logf.FromContext(ctx).V(1).Info("Updated kubeconfig", "token", token, "secret", dstKey)
		}
	}
	return accessState{ready: true, reason: ReasonAccessReady, secret: dstKey.Name,
		message: fmt.Sprintf("The kubeconfig is in Secret %s.", dstKey.Name)}, nil
}

// deleteStaleAccessRequests deletes the MCP's AccessRequests whose token is
// not in wanted.
func (r *Reconciler) deleteStaleAccessRequests(ctx context.Context, m object, wanted map[string]bool) error {
	ars, err := r.accessRequests(ctx, m)
	if err != nil {
		return err
	}
	for i := range ars {
		ar := &ars[i]
		if wanted[ar.Labels[TokenNameLabel]] || !ar.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.platform.GetClient().Delete(ctx, ar); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete AccessRequest %s: %w", client.ObjectKeyFromObject(ar), err)
		}
		logf.FromContext(ctx).V(1).Info("Deleted AccessRequest of a removed token", "accessRequest", client.ObjectKeyFromObject(ar))
	}
	return nil
}

// deleteStaleSecrets deletes the MCP's kubeconfig Secrets on the onboarding
// cluster whose token is not in wanted (nil: all of them).
func (r *Reconciler) deleteStaleSecrets(ctx context.Context, m object, wanted map[string]bool) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.onboarding.GetClient().List(ctx, list, client.InNamespace(m.GetNamespace()), client.MatchingLabels(mcpLabels(m.GetNamespace(), m.GetName()))); err != nil {
		return fmt.Errorf("list kubeconfig Secrets: %w", err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if wanted[s.Labels[TokenNameLabel]] || !metav1.IsControlledBy(s, m) || !s.DeletionTimestamp.IsZero() {
			continue
		}
		s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if err := r.onboarding.GetClient().Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete Secret %s: %w", client.ObjectKeyFromObject(s), err)
		}
		logf.FromContext(ctx).V(1).Info("Deleted kubeconfig Secret", "secret", client.ObjectKeyFromObject(s))
	}
	return nil
}

// accessRequests lists the MCP's AccessRequests on the platform cluster.
func (r *Reconciler) accessRequests(ctx context.Context, m object) ([]clustersv1alpha1.AccessRequest, error) {
	list := &clustersv1alpha1.AccessRequestList{}
	if err := r.platform.GetClient().List(ctx, list,
		client.InNamespace(corev2alpha1.PlatformNamespace(m)),
		client.MatchingLabels(mcpLabels(m.GetNamespace(), m.GetName()))); err != nil {
		return nil, fmt.Errorf("list AccessRequests: %w", err)
	}
	return list.Items, nil
}
