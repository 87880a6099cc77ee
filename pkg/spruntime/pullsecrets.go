package spruntime

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// Labels and annotations on the copies PullSecrets makes.
const (
	// PullSecretPurpose is the value of providerv1alpha1.ManagedPurposeLabel
	// on a copy of an image pull secret; providerv1alpha1.ManagedByLabel
	// holds the provider's name.
	PullSecretPurpose = "image-pull-secret"
	// PullSecretOwnerLabel holds PullSecretTarget.Owner on copies made for
	// one owner; copies without an owner do not carry it.
	PullSecretOwnerLabel = providerv1alpha1.GroupName + "/pull-secret-owner"
	// PullSecretSourceAnnotation names the platform Secret
	// ("namespace/name") a copy was made from, for people.
	PullSecretSourceAnnotation = providerv1alpha1.GroupName + "/pull-secret-source"
)

// Condition reasons of PullSecrets' errors, all InvalidUserInput: the
// ProviderConfig or a Secret has to change before a retry can succeed.
const (
	// ReasonPullSecretMissing: a Secret the ProviderConfig names in
	// spec.imagePullSecrets does not exist in the provider's namespace on
	// the platform cluster.
	ReasonPullSecretMissing = "PullSecretMissing"
	// ReasonInvalidPullSecret: it exists but is not an image pull secret
	// (its type), or its name is empty.
	ReasonInvalidPullSecret = "InvalidPullSecret"
	// ReasonPullSecretConflict: a Secret of the copy's name exists in the
	// target namespace and is not this provider's copy; it is never
	// overwritten.
	ReasonPullSecretConflict = "PullSecretConflict"
)

// PullSecrets copies the image pull secrets a ProviderConfig names
// (openMCP's spec.imagePullSecrets) from the provider's namespace on the
// platform cluster to the namespaces on other clusters where the provider's
// workloads run, where a pod can reference them. Call Sync from
// CreateOrUpdate, Diff from Observe, Remove from Delete.
//
// Only Secrets of type kubernetes.io/dockerconfigjson and
// kubernetes.io/dockercfg are copied, so that a ProviderConfig cannot carry
// the provider's other Secrets (its kubeconfigs) to a workload cluster.
// A copy keeps the source's type and data and is labelled as the
// provider's (ManagedByLabel, ManagedPurposeLabel PullSecretPurpose): a
// Secret of the same name without those labels, such as a tenant's, is
// never changed or deleted. Secret data is never logged nor quoted in
// errors.
type PullSecrets struct {
	// Source reads Secrets in SourceNamespace on the platform cluster.
	// Use the platform cluster's API reader (cluster.GetAPIReader()): a
	// cached client would watch Secrets in every namespace, which the
	// provider may not.
	Source client.Reader
	// SourceNamespace is the provider's namespace on the platform cluster
	// (POD_NAMESPACE, providerapp.Env.Pod.Namespace).
	SourceNamespace string
	// Provider is the provider's name (--provider-name), the
	// ManagedByLabel of the copies.
	Provider string
}

// PullSecretTarget is where PullSecrets puts copies: one namespace of one
// cluster, and optionally one owner's share of it.
type PullSecretTarget struct {
	// Client writes to the cluster (for example
	// ClusterContext.WorkloadCluster.Client()). It needs get, list, create,
	// update and delete on Secrets in Namespace.
	Client client.Client
	// Namespace holds the copies.
	Namespace string
	// Owner, when set, tells apart the copies of several owners (one per
	// service object, say) in one namespace: they carry it in
	// PullSecretOwnerLabel, and Sync and Remove touch only the copies of
	// their Owner. It must be a valid label value. Empty means the copies
	// are the provider's, one per source, as openMCP's providers make them.
	Owner string
	// Prefix is put before the source's name to name the copy, e.g.
	// "<object>-" so that owners in one namespace do not share names.
	Prefix string
}

// Sync makes the copies in t exactly those of refs: it creates missing
// copies, updates those whose source changed (a rotated pull secret),
// and deletes this provider's copies (of t.Owner) whose names refs no
// longer holds. It returns the references a pod in t.Namespace lists in
// spec.imagePullSecrets, in the order of refs.
//
// A Secret that refs names but that does not exist, is not an image pull
// secret, or whose copy's name is taken in t by a Secret not this
// provider's is an InvalidUserInput error naming it (Ready=False with
// ReasonPullSecretMissing, ReasonInvalidPullSecret or
// ReasonPullSecretConflict); nothing is deleted then.
func (p PullSecrets) Sync(ctx context.Context, t PullSecretTarget, refs []corev1.LocalObjectReference) ([]corev1.LocalObjectReference, error) {
	if err := p.check(t); err != nil {
		return nil, err
	}
	sources, err := p.sources(ctx, refs)
	if err != nil {
		return nil, err
	}
	log := logf.FromContext(ctx)
	out := make([]corev1.LocalObjectReference, 0, len(sources))
	wanted := make([]string, 0, len(sources))
	for _, src := range sources {
		want := p.copyOf(src, t)
		out = append(out, corev1.LocalObjectReference{Name: want.Name})
		wanted = append(wanted, want.Name)
		op, err := p.apply(ctx, t, want)
		if err != nil {
			return nil, err
		}
		if op != "" {
			log.V(1).Info("Synced an image pull secret", "source", src.Namespace+"/"+src.Name, "copy", want.Namespace+"/"+want.Name, "operation", op)
		}
	}
	if err := p.removeExcept(ctx, t, wanted); err != nil {
		return nil, err
	}
	return out, nil
}

// Diff says how the copies in t differ from what Sync would make of refs:
// missing, stale (source rotated), or not (or no longer) wanted. "" means
// they are as wanted. Its errors are Sync's.
func (p PullSecrets) Diff(ctx context.Context, t PullSecretTarget, refs []corev1.LocalObjectReference) (string, error) {
	if err := p.check(t); err != nil {
		return "", err
	}
	sources, err := p.sources(ctx, refs)
	if err != nil {
		return "", err
	}
	var diffs []string
	wanted := make([]string, 0, len(sources))
	for _, src := range sources {
		want := p.copyOf(src, t)
		wanted = append(wanted, want.Name)
		got := &corev1.Secret{}
		key := client.ObjectKeyFromObject(want)
		if err := t.Client.Get(ctx, key, got); err != nil {
			if apierrors.IsNotFound(err) {
				diffs = append(diffs, fmt.Sprintf("image pull secret %s is missing", key))
				continue
			}
			return "", fmt.Errorf("get image pull secret copy %s: %w", key, err)
		}
		if !p.ours(got, t) {
			return "", p.conflict(key)
		}
		if !upToDate(got, want) {
			diffs = append(diffs, fmt.Sprintf("image pull secret %s differs from its source %s/%s", key, src.Namespace, src.Name))
		}
	}
	copies, err := p.copies(ctx, t)
	if err != nil {
		return "", err
	}
	for _, c := range copies {
		if !slices.Contains(wanted, c.Name) {
			diffs = append(diffs, fmt.Sprintf("image pull secret %s/%s is no longer wanted", c.Namespace, c.Name))
		}
	}
	return strings.Join(diffs, "; "), nil
}

// Remove deletes this provider's copies (of t.Owner) in t: what Delete
// calls. Secrets that are not its copies are left alone.
func (p PullSecrets) Remove(ctx context.Context, t PullSecretTarget) error {
	if err := p.check(t); err != nil {
		return err
	}
	return p.removeExcept(ctx, t, nil)
}

// check reports a PullSecrets or target that cannot work.
func (p PullSecrets) check(t PullSecretTarget) error {
	switch {
	case p.Source == nil || p.SourceNamespace == "" || p.Provider == "":
		return fmt.Errorf("image pull secrets: PullSecrets needs Source, SourceNamespace and Provider")
	case t.Client == nil || t.Namespace == "":
		return fmt.Errorf("image pull secrets: the target needs Client and Namespace")
	}
	if t.Owner != "" {
		if errs := validation.IsValidLabelValue(t.Owner); len(errs) > 0 {
			return fmt.Errorf("image pull secrets: owner %q is not a label value: %s", t.Owner, strings.Join(errs, "; "))
		}
	}
	return nil
}

// sources reads the Secrets refs names, each once, in their order.
func (p PullSecrets) sources(ctx context.Context, refs []corev1.LocalObjectReference) ([]*corev1.Secret, error) {
	out := make([]*corev1.Secret, 0, len(refs))
	seen := map[string]bool{}
	for i, ref := range refs {
		if ref.Name == "" {
			return nil, InvalidUserInput(ReasonInvalidPullSecret, "spec.imagePullSecrets[%d] has no name", i)
		}
		if seen[ref.Name] {
			continue
		}
		seen[ref.Name] = true
		src := &corev1.Secret{}
		key := client.ObjectKey{Namespace: p.SourceNamespace, Name: ref.Name}
		if err := p.Source.Get(ctx, key, src); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, InvalidUserInput(ReasonPullSecretMissing, "image pull secret %s not found on the platform cluster: create it there, or remove it from the ProviderConfig's spec.imagePullSecrets", key)
			}
			return nil, fmt.Errorf("get image pull secret %s on the platform cluster: %w", key, err)
		}
		if src.Type != corev1.SecretTypeDockerConfigJson && src.Type != corev1.SecretTypeDockercfg {
			return nil, InvalidUserInput(ReasonInvalidPullSecret, "Secret %s on the platform cluster has type %q; an image pull secret has type %s or %s", key, src.Type, corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg)
		}
		out = append(out, src)
	}
	return out, nil
}

// labels are the labels of the copies in t.
func (p PullSecrets) labels(t PullSecretTarget) map[string]string {
	l := map[string]string{
		providerv1alpha1.ManagedByLabel:      p.Provider,
		providerv1alpha1.ManagedPurposeLabel: PullSecretPurpose,
	}
	if t.Owner != "" {
		l[PullSecretOwnerLabel] = t.Owner
	}
	return l
}

// copyOf is the copy of src that t should hold.
func (p PullSecrets) copyOf(src *corev1.Secret, t PullSecretTarget) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   t.Namespace,
			Name:        t.Prefix + src.Name,
			Labels:      p.labels(t),
			Annotations: map[string]string{PullSecretSourceAnnotation: src.Namespace + "/" + src.Name},
		},
		Type: src.Type,
		Data: maps.Clone(src.Data),
	}
}

// ours reports whether s is a copy of this provider for t's owner.
func (p PullSecrets) ours(s *corev1.Secret, t PullSecretTarget) bool {
	l := s.GetLabels()
	return l[providerv1alpha1.ManagedByLabel] == p.Provider &&
		l[providerv1alpha1.ManagedPurposeLabel] == PullSecretPurpose &&
		l[PullSecretOwnerLabel] == t.Owner
}

// conflict is the error of a Secret at key that is not this provider's
// copy.
func (p PullSecrets) conflict(key client.ObjectKey) error {
	return InvalidUserInput(ReasonPullSecretConflict, "Secret %s exists and is not an image pull secret copy of provider %s (labels %s, %s); it is never overwritten: delete or rename it, or remove its name from the ProviderConfig's spec.imagePullSecrets", key, p.Provider, providerv1alpha1.ManagedByLabel, providerv1alpha1.ManagedPurposeLabel)
}

// apply creates or updates the copy want in t and says what it did ("" for
// nothing).
func (p PullSecrets) apply(ctx context.Context, t PullSecretTarget, want *corev1.Secret) (string, error) {
	key := client.ObjectKeyFromObject(want)
	got := &corev1.Secret{}
	if err := t.Client.Get(ctx, key, got); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("get image pull secret copy %s: %w", key, err)
		}
		if err := t.Client.Create(ctx, want); err != nil {
			// One created since the read (a conflict the next try
			// reads) or refused: either way, say which.
			return "", fmt.Errorf("create image pull secret copy %s: %w", key, err)
		}
		return "created", nil
	}
	if !p.ours(got, t) {
		return "", p.conflict(key)
	}
	if !got.DeletionTimestamp.IsZero() {
		return "", fmt.Errorf("image pull secret copy %s is being deleted; waiting until it is gone", key)
	}
	if upToDate(got, want) {
		return "", nil
	}
	if got.Type != want.Type {
		// The type of a Secret cannot change: replace the copy. The
		// precondition keeps a Secret that replaced it from being deleted.
		uid := got.UID
		if err := t.Client.Delete(ctx, got, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("replace image pull secret copy %s of another type: %w", key, err)
		}
		if err := t.Client.Create(ctx, want); err != nil {
			return "", fmt.Errorf("create image pull secret copy %s: %w", key, err)
		}
		return "replaced", nil
	}
	if got.Labels == nil {
		got.Labels = map[string]string{}
	}
	maps.Copy(got.Labels, want.Labels)
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	maps.Copy(got.Annotations, want.Annotations)
	got.Data = want.Data
	got.StringData = nil
	if err := t.Client.Update(ctx, got); err != nil {
		return "", fmt.Errorf("update image pull secret copy %s: %w", key, err)
	}
	return "updated", nil
}

// upToDate reports whether got holds want's type, data, labels and
// annotations.
func upToDate(got, want *corev1.Secret) bool {
	if got.Type != want.Type || len(got.Data) != len(want.Data) {
		return false
	}
	for k, v := range want.Data {
		if g, ok := got.Data[k]; !ok || !bytes.Equal(g, v) {
			return false
		}
	}
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if got.Annotations[k] != v {
			return false
		}
	}
	return true
}

// copies lists this provider's copies of t's owner in t.Namespace: only
// their metadata, the data is not needed.
func (p PullSecrets) copies(ctx context.Context, t PullSecretTarget) ([]metav1.PartialObjectMetadata, error) {
	sel := labels.SelectorFromSet(labels.Set{
		providerv1alpha1.ManagedByLabel:      p.Provider,
		providerv1alpha1.ManagedPurposeLabel: PullSecretPurpose,
	})
	if t.Owner != "" {
		r, err := labels.NewRequirement(PullSecretOwnerLabel, selection.Equals, []string{t.Owner})
		if err != nil {
			return nil, fmt.Errorf("image pull secrets: owner selector: %w", err)
		}
		sel = sel.Add(*r)
	} else {
		r, err := labels.NewRequirement(PullSecretOwnerLabel, selection.DoesNotExist, nil)
		if err != nil {
			return nil, fmt.Errorf("image pull secrets: owner selector: %w", err)
		}
		sel = sel.Add(*r)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := t.Client.List(ctx, list, client.InNamespace(t.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list image pull secret copies in namespace %s: %w", t.Namespace, err)
	}
	return list.Items, nil
}

// removeExcept deletes the copies of t that keep does not name.
func (p PullSecrets) removeExcept(ctx context.Context, t PullSecretTarget, keep []string) error {
	copies, err := p.copies(ctx, t)
	if err != nil {
		return err
	}
	for i := range copies {
		c := &copies[i]
		if slices.Contains(keep, c.Name) || !c.DeletionTimestamp.IsZero() {
			continue
		}
		c.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		uid := c.UID
		if err := t.Client.Delete(ctx, c, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete image pull secret copy %s/%s: %w", c.Namespace, c.Name, err)
		}
		logf.FromContext(ctx).V(1).Info("Deleted an image pull secret copy", "copy", c.Namespace+"/"+c.Name)
	}
	return nil
}
