package mcp

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// resolvePlatformNamespace returns the platform namespace of m: the one
// recorded in its PlatformNamespaceAnnotation; else, for a
// ManagedControlPlane created by an earlier version (its ClusterRequest is in
// the legacy namespace), the legacy namespace, so that it keeps its cluster
// and access; else openMCP's namespace.
func (r *Reconciler) resolvePlatformNamespace(ctx context.Context, m object) (string, error) {
	if _, ok := m.GetAnnotations()[corev2alpha1.PlatformNamespaceAnnotation]; ok {
		return corev2alpha1.PlatformNamespace(m), nil
	}
	stable := corev2alpha1.StableMCPNamespace(m.GetNamespace(), m.GetName())
	if kindOf(m) != KindManagedControlPlane {
		// Earlier versions served no other kind.
		return stable, nil
	}
	legacy := corev2alpha1.LegacyMCPNamespace(m.GetNamespace(), m.GetName())
	// From the API server: this runs once per MCP (until the annotation is
	// set), and a cache that has not seen the old request yet would move
	// the MCP to a new cluster.
	cr := &clustersv1alpha1.ClusterRequest{}
	err := r.platform.GetAPIReader().Get(ctx, types.NamespacedName{Namespace: legacy, Name: m.GetName()}, cr)
	switch {
	case apierrors.IsNotFound(err):
		return stable, nil
	case err != nil:
		return "", fmt.Errorf("look for the ClusterRequest of %s in legacy namespace %s: %w", ref(m), legacy, err)
	case !sameMCP(cr.Labels, m):
		// Not made for this MCP: it gets the new namespace.
		return stable, nil
	}
	logf.FromContext(ctx).V(1).Info("Keeping the legacy platform namespace", "platformNamespace", legacy)
	return legacy, nil
}

// recordPlatformNamespace sets m's PlatformNamespaceAnnotation to ns, so
// that everyone (PlatformNamespace) finds its requests there.
func (r *Reconciler) recordPlatformNamespace(ctx context.Context, m object, ns string) error {
	if m.GetAnnotations()[corev2alpha1.PlatformNamespaceAnnotation] == ns {
		return nil
	}
	orig := copyOf(m)
	annotations := maps.Clone(m.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[corev2alpha1.PlatformNamespaceAnnotation] = ns
	m.SetAnnotations(annotations)
	if err := r.onboarding.GetClient().Patch(ctx, m, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("record platform namespace %s on %s: %w", ns, ref(m), err)
	}
	return nil
}

// sameMCP reports whether labels tie an object to the control plane m.
func sameMCP(labels map[string]string, m object) bool {
	return corev2alpha1.HasMCPLabels(labels, m.GetNamespace(), m.GetName())
}

// holder returns the kind of the control plane that holds the platform
// namespace ns, or "" when no control plane does. A namespace with the MCP
// labels but without MCPKindLabel was created by an earlier version, which
// served ManagedControlPlanes only.
func holder(ns *corev1.Namespace) string {
	if k := ns.Labels[corev2alpha1.MCPKindLabel]; k != "" {
		return k
	}
	if ns.Labels[corev2alpha1.MCPNameLabel] != "" || ns.Labels[corev2alpha1.MCPNamespaceLabel] != "" {
		return KindManagedControlPlane
	}
	return ""
}

// holds reports whether the platform namespace ns belongs to m.
func holds(ns *corev1.Namespace, m object) bool {
	return holder(ns) == kindOf(m) && sameMCP(ns.Labels, m)
}

// namespaceLabels are the labels of m's platform namespace.
func namespaceLabels(m object) map[string]string {
	l := mcpLabels(m.GetNamespace(), m.GetName())
	l[corev2alpha1.MCPKindLabel] = kindOf(m)
	return l
}

// conflictMessage says why m cannot have its platform namespace ns.
func conflictMessage(m object, ns *corev1.Namespace) string {
	if h := holder(ns); h != "" && h != kindOf(m) {
		return fmt.Sprintf("A %s named %s/%s already holds platform namespace %s; a ManagedControlPlane and a ControlPlane of one namespace and name cannot both exist. Delete one of them.",
			h, m.GetNamespace(), m.GetName(), ns.Name)
	}
	return fmt.Sprintf("Platform namespace %s belongs to another control plane (%s/%s, %s).",
		ns.Name, ns.Labels[corev2alpha1.MCPNamespaceLabel], ns.Labels[corev2alpha1.MCPNameLabel], holder(ns))
}

// otherCandidate returns the platform namespace, other than ns, that a
// control plane of m's namespace and name can have: the legacy one for the
// current one and the other way round.
func otherCandidate(m object, ns string) string {
	if stable := corev2alpha1.StableMCPNamespace(m.GetNamespace(), m.GetName()); ns != stable {
		return stable
	}
	return corev2alpha1.LegacyMCPNamespace(m.GetNamespace(), m.GetName())
}

// claimNamespace makes sure m holds its platform namespace ns: it creates
// the namespace, labelled for m, or labels an existing one that it holds
// already (a namespace of an earlier version gets MCPKindLabel) or that no
// control plane holds. When the other kind's control plane of the same
// namespace and name holds ns, or holds the other namespace such a control
// plane can have (a ManagedControlPlane of an earlier version holds the
// legacy one), claimNamespace returns a message that says so and changes
// nothing: the first one keeps its cluster.
func (r *Reconciler) claimNamespace(ctx context.Context, m object, name string) (string, error) {
	pc := r.platform.GetClient()
	ns := &corev1.Namespace{}
	err := pc.Get(ctx, types.NamespacedName{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = nil
	case err != nil:
		return "", fmt.Errorf("get platform namespace %s: %w", name, err)
	}
	if ns == nil || !holds(ns, m) {
		// Only a control plane that holds no namespace yet can lose to the
		// other kind; the one that holds it is never asked to step back.
		if msg, err := r.otherKindHolds(ctx, m, otherCandidate(m, name)); err != nil || msg != "" {
			return msg, err
		}
	}
	if ns == nil {
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: namespaceLabels(m)}}
		err := pc.Create(ctx, ns)
		if err == nil {
			logf.FromContext(ctx).V(1).Info("Created platform namespace", "platformNamespace", name)
			return "", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create platform namespace %s: %w", name, err)
		}
		// Someone else, perhaps the other kind's controller, created it
		// just now: look at it on the API server, not in the cache.
		ns = &corev1.Namespace{}
		if err := r.platform.GetAPIReader().Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
			return "", fmt.Errorf("get platform namespace %s: %w", name, err)
		}
	}
	if !ns.DeletionTimestamp.IsZero() {
		// A previous control plane of the same name is still being cleaned
		// up; the error brings it back with backoff.
		return "", fmt.Errorf("platform namespace %s is still terminating", name)
	}
	switch {
	case holds(ns, m) && ns.Labels[corev2alpha1.MCPKindLabel] != "":
		return "", nil
	case holder(ns) == "" || holds(ns, m):
		// Unheld, or held by m since before MCPKindLabel existed: label it.
		// The optimistic lock lets only one of two racing claimants win.
		orig := ns.DeepCopy()
		labels := maps.Clone(ns.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, namespaceLabels(m))
		ns.Labels = labels
		if err := pc.Patch(ctx, ns, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return "", fmt.Errorf("label platform namespace %s: %w", name, err)
		}
		logf.FromContext(ctx).V(1).Info("Labelled platform namespace", "platformNamespace", name)
		return "", nil
	default:
		return conflictMessage(m, ns), nil
	}
}

// otherKindHolds returns a conflict message when the platform namespace
// name exists and a control plane other than m holds it.
func (r *Reconciler) otherKindHolds(ctx context.Context, m object, name string) (string, error) {
	ns := &corev1.Namespace{}
	if err := r.platform.GetClient().Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("get platform namespace %s: %w", name, err)
	}
	if holder(ns) == "" || holds(ns, m) {
		return "", nil
	}
	return conflictMessage(m, ns), nil
}

// deletionConflict returns a message when m, being deleted, holds neither of
// its platform namespaces (name, its own, and the other candidate) while
// the other kind's control plane holds one:
// then the service objects and requests named like m are that one's, and
// the deletion of m must not touch them.
func (r *Reconciler) deletionConflict(ctx context.Context, m object, name string) (string, error) {
	ns := &corev1.Namespace{}
	err := r.platform.GetAPIReader().Get(ctx, types.NamespacedName{Name: name}, ns)
	switch {
	case err == nil:
		if holds(ns, m) {
			return "", nil
		}
		if holder(ns) != "" {
			return conflictMessage(m, ns), nil
		}
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("get platform namespace %s: %w", name, err)
	}
	otherName := otherCandidate(m, name)
	other := &corev1.Namespace{}
	err = r.platform.GetAPIReader().Get(ctx, types.NamespacedName{Name: otherName}, other)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("get platform namespace %s: %w", otherName, err)
	case holder(other) != "" && !holds(other, m):
		return conflictMessage(m, other), nil
	}
	return "", nil
}
