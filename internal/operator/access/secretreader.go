package access

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/internal/operator/provider"
)

// secretReaderName names the Role and RoleBinding that let the provider of
// an AccessRequest in an MCP namespace read its kubeconfig Secret: the
// Secret's own name (a Role and a Secret do not share a name space).
func secretReaderName(ar *clustersv1alpha1.AccessRequest) string { return SecretName(ar) }

// ensureSecretReader lets the provider req, whose AccessRequest ar lives in
// a tenant's MCP namespace, read ar's kubeconfig Secret and nothing else
// there: a Role with get on that one Secret, bound to the provider's run
// ServiceAccount. Both are controlled by ar, so they go with it (and
// revoke deletes them at once). openMCP's clusteraccess library reads the
// Secret with a direct GET, which this allows; other providers, and the
// provider for the MCP's own Secrets, have no Secret rights in MCP
// namespaces (internal/operator/mcpaccess).
func (r *Reconciler) ensureSecretReader(ctx context.Context, ar *clustersv1alpha1.AccessRequest, req *policy.Requester) (*outcome, error) {
	saNamespace, sa, ok := provider.RunServiceAccount(req.Kind, req.Name)
	if !ok {
		return nil, fmt.Errorf("no run ServiceAccount for %s", req)
	}
	name := secretReaderName(ar)
	labels := map[string]string{providerv1alpha1.ManagedByLabel: ManagedByValue}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ar.Namespace}}
	if o, err := r.controlled(ctx, ar, role, func() error {
		role.Labels = labels
		role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{SecretName(ar)}, Verbs: []string{"get"}}}
		return nil
	}); o != nil || err != nil {
		return o, err
	}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ar.Namespace}}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(binding), binding); err == nil && binding.RoleRef != ref && metav1.IsControlledBy(binding, ar) {
		// roleRef is immutable.
		if err := r.client.Delete(ctx, binding); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("replace RoleBinding %s/%s: %w", ar.Namespace, name, err)
		}
		binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ar.Namespace}}
	}
	return r.controlled(ctx, ar, binding, func() error {
		binding.Labels = labels
		binding.RoleRef = ref
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: saNamespace}}
		return nil
	})
}

// controlled creates or updates obj, controlled by ar, with mutate. An
// object of that name that ar does not control is left alone and the
// request denied: only the platform operator and the operator write RBAC in
// MCP namespaces, so it is theirs.
func (r *Reconciler) controlled(ctx context.Context, ar *clustersv1alpha1.AccessRequest, obj client.Object, mutate func() error) (*outcome, error) {
	var foreign bool
	_, err := controllerutil.CreateOrUpdate(ctx, r.client, obj, func() error {
		if obj.GetResourceVersion() != "" && !metav1.IsControlledBy(obj, ar) {
			foreign = true
			return errForeign
		}
		if err := mutate(); err != nil {
			return err
		}
		return controllerutil.SetControllerReference(ar, obj, r.client.Scheme())
	})
	if foreign {
		return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonSecretConflict,
			message: fmt.Sprintf("%T %s/%s exists and does not belong to this AccessRequest", obj, obj.GetNamespace(), obj.GetName())}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("write %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil, nil
}

var errForeign = fmt.Errorf("object belongs to someone else")

// deleteSecretReader deletes the Role and RoleBinding of ensureSecretReader
// when ar controls them.
func (r *Reconciler) deleteSecretReader(ctx context.Context, ar *clustersv1alpha1.AccessRequest) error {
	key := client.ObjectKey{Namespace: ar.Namespace, Name: secretReaderName(ar)}
	for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &rbacv1.Role{}} {
		if err := r.client.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("get %T %s: %w", obj, key, err)
		}
		if !metav1.IsControlledBy(obj, ar) {
			continue
		}
		if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %T %s: %w", obj, key, err)
		}
	}
	return nil
}
