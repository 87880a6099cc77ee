package console

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
)

// A code-based offering's object lives next to its ManagedControlPlane:
// same namespace, same name (the provider runtime finds the control plane
// so, pkg/clusteraccess). The console orders one as the broker does
// (internal/broker/code): it creates the control plane named after the
// instance, or places the object at a control plane the tenant picks.
// The broker's code is not called: it records OSB instances in osb-<id>
// namespaces with the broker's own credentials, where the console acts
// with the tenant's token in the tenant's namespace.

// managedControlPlanesGVR is the ManagedControlPlane resource.
var managedControlPlanesGVR = corev2alpha1.GroupVersion.WithResource("managedcontrolplanes")

// ControlPlaneField is the order form's field that names an existing
// ManagedControlPlane of the namespace; empty orders a new one.
const ControlPlaneField = "controlplane"

// AnnotationCreatedBy marks a ManagedControlPlane the console created for
// an order; its value is the kind and name of the object ordered.
const AnnotationCreatedBy = "console.marketplane.io/created-for"

// controlPlaneView is the ManagedControlPlane of a code-based instance on
// its page: its Ready condition is the first half of the progress.
type controlPlaneView struct {
	Name                   string
	Phase                  string
	Ready, Reason, Message string
	CreatedByConsole       bool
	Missing                bool
	Error                  string
}

// loadControlPlane reads the ManagedControlPlane an object of a code-based
// offering needs: ns/name.
func loadControlPlane(ctx context.Context, sess *session, ns, name string) *controlPlaneView {
	cp := &controlPlaneView{Name: name, Ready: "Unknown"}
	u, err := sess.kube.onboarding.Resource(managedControlPlanesGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cp.Missing = true
		return cp
	case err != nil:
		cp.Error = describeError("read the ManagedControlPlane "+name, err).Message
		return cp
	}
	st := statusOf(u)
	cp.Phase = st.Phase
	cp.Ready, cp.Reason, cp.Message = st.ready()
	_, cp.CreatedByConsole = u.GetAnnotations()[AnnotationCreatedBy]
	return cp
}

// controlPlaneChoice is one ManagedControlPlane of the order form's picker.
type controlPlaneChoice struct {
	Name     string
	Ready    string
	Taken    bool // it has an object of the selected kind already
	Selected bool
}

// listControlPlanes returns the ManagedControlPlanes of ns for the picker,
// marking those that already hold an object of kind (a control plane has
// at most one object of each kind: the object takes its name). A tenant
// who may not list them gets an empty picker and an explanation.
func listControlPlanes(ctx context.Context, sess *session, ns string, kind *marketplacev1alpha1.OfferedKind, selected string) ([]controlPlaneChoice, string) {
	l, err := sess.kube.onboarding.Resource(managedControlPlanesGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, describeError("list the ManagedControlPlanes of "+ns, err).Message
	}
	taken := map[string]bool{}
	if objs, err := sess.kube.listLean(ctx, providerGVR(*kind), ns); err == nil {
		for i := range objs {
			taken[objs[i].Metadata.Name] = true
		}
	}
	out := make([]controlPlaneChoice, 0, len(l.Items))
	for i := range l.Items {
		u := &l.Items[i]
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		ready, _, _ := statusOf(u).ready()
		out = append(out, controlPlaneChoice{Name: u.GetName(), Ready: ready, Taken: taken[u.GetName()], Selected: u.GetName() == selected})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, ""
}

// createControlPlane creates the ManagedControlPlane ns/name for an order
// of kind, with the tenant's token.
func createControlPlane(ctx context.Context, sess *session, ns, name, kind string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": corev2alpha1.GroupVersion.String(),
		"kind":       "ManagedControlPlane",
		"metadata": map[string]any{
			"name": name, "namespace": ns,
			"annotations": map[string]any{AnnotationCreatedBy: kind + "/" + name},
		},
		"spec": map[string]any{"iam": map[string]any{}},
	}}
	if _, err := sess.kube.onboarding.Resource(managedControlPlanesGVR).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ManagedControlPlane %s/%s: %w", ns, name, err)
	}
	return nil
}

// deleteControlPlane removes a ManagedControlPlane the console created for
// an order whose object could not be created, so the order can be sent
// again.
func deleteControlPlane(ctx context.Context, sess *session, ns, name string) error {
	err := sess.kube.onboarding.Resource(managedControlPlanesGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ManagedControlPlane %s/%s: %w", ns, name, err)
	}
	return nil
}
