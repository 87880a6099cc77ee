package marketplace

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	"github.com/marketplane/marketplane/pkg/crdinstall"
)

// ViewerClusterRole is the ClusterRole that lets read Offerings. Its label
// aggregates it into Kubernetes' view ClusterRole (and so into edit and
// admin). Offerings are cluster-scoped, and a namespace's RoleBinding to
// view grants nothing outside the namespace; so the ClusterRoleBinding of
// the same name grants the ClusterRole to every authenticated user, which
// is what lets every tenant read the marketplace.
const ViewerClusterRole = "marketplane:offerings-viewer"

// authenticated is the group of every authenticated user.
const authenticated = "system:authenticated"

// aggregateToView is the label that makes the clusterrole-aggregation
// controller add a ClusterRole's rules to the view ClusterRole.
const aggregateToView = "rbac.authorization.k8s.io/aggregate-to-view"

// ViewerRole returns the ClusterRole ViewerClusterRole: get, list and watch
// on Offerings, nothing else. Only the controller writes Offerings.
func ViewerRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   ViewerClusterRole,
			Labels: map[string]string{aggregateToView: "true"},
		},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{marketplacev1alpha1.GroupVersion.Group},
			Resources: []string{"offerings"},
			Verbs:     []string{"get", "list", "watch"},
		}},
	}
}

// ViewerBinding returns the ClusterRoleBinding ViewerClusterRole that
// grants ViewerRole to every authenticated user.
func ViewerBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ViewerClusterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ViewerClusterRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: authenticated}},
	}
}

// CRDs returns the CRDs the controller serves on the onboarding cluster:
// the Offering's.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := crds.All()
	if err != nil {
		return nil, fmt.Errorf("load CRDs: %w", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if crd.Spec.Group == marketplacev1alpha1.GroupVersion.Group {
			out = append(out, crd)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRD of group %s is embedded", marketplacev1alpha1.GroupVersion.Group)
	}
	return out, nil
}

// Init installs on the onboarding cluster (client c) what the controller
// needs: the Offering CRD, waited for until established (timeout, or
// crdinstall.DefaultTimeout when zero), ViewerRole and ViewerBinding. Both are applied
// server-side as FieldOwner, so running Init again is harmless.
func Init(ctx context.Context, c client.Client, timeout time.Duration) error {
	list, err := CRDs()
	if err != nil {
		return err
	}
	if err := crdinstall.Apply(ctx, c, FieldOwner, timeout, list...); err != nil {
		return fmt.Errorf("install marketplace CRDs: %w", err)
	}
	return applyViewerRBAC(ctx, c)
}

// applyViewerRBAC applies ViewerRole and ViewerBinding server-side as
// FieldOwner.
func applyViewerRBAC(ctx context.Context, c client.Client) error {
	for _, obj := range []client.Object{ViewerRole(), ViewerBinding()} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return fmt.Errorf("apply %T %s: %w", obj, obj.GetName(), err)
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
