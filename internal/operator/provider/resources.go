package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

// objectMeta is the metadata of an object the operator creates for the
// provider of w: its labels and a controller reference to the provider
// object, so that the garbage collector would clean up even if the
// operator's own clean-up never ran.
func objectMeta(w *deploy.Workload, namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       namespace,
		Labels:          maps.Clone(w.Labels),
		OwnerReferences: []metav1.OwnerReference{w.Owner},
	}
}

// ensureNamespace applies the provider's namespace and reports whether it
// is still being deleted (from an earlier provider of the same name), in
// which case nothing can be created in it yet.
func (r *Reconciler[T]) ensureNamespace(ctx context.Context, w *deploy.Workload) (terminating bool, err error) {
	ns := &corev1.Namespace{ObjectMeta: objectMeta(w, "", w.Namespace)}
	if err := apply(ctx, r.client, ns); err != nil {
		return false, err
	}
	return ns.DeletionTimestamp != nil, nil
}

// ensureServiceAccounts applies the init and run ServiceAccounts.
func (r *Reconciler[T]) ensureServiceAccounts(ctx context.Context, w *deploy.Workload) error {
	for _, name := range []string{w.InitServiceAccount, w.RunServiceAccount} {
		sa := &corev1.ServiceAccount{ObjectMeta: objectMeta(w, w.Namespace, name)}
		if err := apply(ctx, r.client, sa); err != nil {
			return err
		}
	}
	return nil
}

// ensurePullSecrets copies the image pull secrets of w from the operator's
// namespace into the provider's and deletes copies that are no longer
// named. A Secret that does not exist is a user error: its message is
// returned, and nothing else is copied until it exists.
func (r *Reconciler[T]) ensurePullSecrets(ctx context.Context, w *deploy.Workload) (missing string, err error) {
	wanted := make([]string, 0, len(w.ImagePullSecrets))
	for _, ref := range w.ImagePullSecrets {
		wanted = append(wanted, ref.Name)
		src := &corev1.Secret{}
		key := client.ObjectKey{Namespace: r.opts.operatorNamespace, Name: ref.Name}
		if err := r.opts.reader.Get(ctx, key, src); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Sprintf("image pull secret %s not found in namespace %s", ref.Name, r.opts.operatorNamespace), nil
			}
			return "", fmt.Errorf("get image pull secret %s: %w", key, err)
		}
		cp := &corev1.Secret{
			ObjectMeta: objectMeta(w, w.Namespace, ref.Name),
			Type:       src.Type,
			Data:       src.Data,
		}
		cp.Labels[providerv1alpha1.ManagedPurposeLabel] = PurposeImagePullSecret
		if err := apply(ctx, r.client, cp); err != nil {
			return "", err
		}
	}
	copies, err := r.pullSecretCopies(ctx, w)
	if err != nil {
		return "", err
	}
	for _, s := range copies {
		if slices.Contains(wanted, s.GetName()) {
			continue
		}
		if err := r.client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("delete unused image pull secret copy %s: %w", client.ObjectKeyFromObject(s), err)
		}
	}
	return "", nil
}

// pullSecretCopies lists the image pull secrets copied for w.
func (r *Reconciler[T]) pullSecretCopies(ctx context.Context, w *deploy.Workload) ([]client.Object, error) {
	sel := maps.Clone(w.Labels)
	sel[providerv1alpha1.ManagedPurposeLabel] = PurposeImagePullSecret
	// Only metadata is needed: the copies' data never has to be read.
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.opts.reader.List(ctx, list, client.InNamespace(w.Namespace), client.MatchingLabels(sel)); err != nil {
		return nil, fmt.Errorf("list image pull secret copies in %s: %w", w.Namespace, err)
	}
	out := make([]client.Object, 0, len(list.Items))
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		out = append(out, &list.Items[i])
	}
	return out, nil
}
