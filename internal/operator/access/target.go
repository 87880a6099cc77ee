package access

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// newTargetClient returns a client for a target cluster. It knows only the
// built-in kinds, which is all the controller creates there.
func newTargetClient(cfg *rest.Config) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = TargetTimeout
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// isUnreachable reports whether err is not an answer of the API server
// (a refused connection, a timeout, a TLS failure).
func isUnreachable(err error) bool {
	var status apierrors.APIStatus
	return err != nil && !errors.As(err, &status)
}

// conflictError says that an object of a name the request wants exists and
// was not created for it.
type conflictError struct {
	kind, key string
}

func (e *conflictError) Error() string {
	return fmt.Sprintf("%s %s exists and does not belong to this AccessRequest", e.kind, e.key)
}

// namespaceMissingError says that a namespace the request needs does not
// exist and may not be created.
type namespaceMissingError struct {
	namespace string
}

func (e *namespaceMissingError) Error() string {
	return fmt.Sprintf("namespace %q does not exist on the target cluster (disableAutomaticNamespaceCreation or a roleRef to a Role in it)", e.namespace)
}

// errRoleRefChanged makes ensure replace a binding whose (immutable) roleRef
// differs from the wanted one.
var errRoleRefChanged = errors.New("roleRef changed")

// applyTarget creates or updates everything in want on the target cluster
// and deletes what was created for uid earlier but is no longer wanted. It
// returns the ServiceAccount as stored (with its UID).
func applyTarget(ctx context.Context, c client.Client, uid string, accessNamespace string, namespaces *namespacePlan, want targetObjects) (*corev1.ServiceAccount, error) {
	if err := ensureNamespace(ctx, c, accessNamespace); err != nil {
		return nil, err
	}
	if err := namespaces.apply(ctx, c); err != nil {
		return nil, err
	}

	sa, err := ensure(ctx, c, uid, "ServiceAccount", want.serviceAccount, func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} },
		func(_, _ *corev1.ServiceAccount) error { return nil })
	if err != nil {
		return nil, err
	}
	for _, role := range want.roles {
		if _, err := ensure(ctx, c, uid, "Role", role, func() *rbacv1.Role { return &rbacv1.Role{} },
			func(dst, src *rbacv1.Role) error { dst.Rules = src.Rules; return nil }); err != nil {
			return nil, err
		}
	}
	for _, role := range want.clusterRoles {
		if _, err := ensure(ctx, c, uid, "ClusterRole", role, func() *rbacv1.ClusterRole { return &rbacv1.ClusterRole{} },
			func(dst, src *rbacv1.ClusterRole) error { dst.Rules = src.Rules; return nil }); err != nil {
			return nil, err
		}
	}
	for _, b := range want.roleBindings {
		if err := ensureBinding(ctx, c, uid, "RoleBinding", b, func() *rbacv1.RoleBinding { return &rbacv1.RoleBinding{} },
			func(dst, src *rbacv1.RoleBinding) error {
				if dst.ResourceVersion != "" && dst.RoleRef != src.RoleRef {
					return errRoleRefChanged
				}
				dst.RoleRef, dst.Subjects = src.RoleRef, src.Subjects
				return nil
			}); err != nil {
			return nil, err
		}
	}
	for _, b := range want.clusterRoleBindings {
		if err := ensureBinding(ctx, c, uid, "ClusterRoleBinding", b, func() *rbacv1.ClusterRoleBinding { return &rbacv1.ClusterRoleBinding{} },
			func(dst, src *rbacv1.ClusterRoleBinding) error {
				if dst.ResourceVersion != "" && dst.RoleRef != src.RoleRef {
					return errRoleRefChanged
				}
				dst.RoleRef, dst.Subjects = src.RoleRef, src.Subjects
				return nil
			}); err != nil {
			return nil, err
		}
	}
	keep := map[string]bool{}
	for _, o := range want.all() {
		keep[o.GetNamespace()+"/"+o.GetName()] = true
	}
	if err := deleteLabelled(ctx, c, uid, keep); err != nil {
		return nil, err
	}
	return sa, nil
}

// all returns the ServiceAccount, roles and bindings of t.
func (t targetObjects) all() []client.Object {
	out := []client.Object{t.serviceAccount}
	for _, o := range t.roles {
		out = append(out, o)
	}
	for _, o := range t.clusterRoles {
		out = append(out, o)
	}
	for _, o := range t.roleBindings {
		out = append(out, o)
	}
	for _, o := range t.clusterRoleBindings {
		out = append(out, o)
	}
	return out
}

// ensureNamespace creates the namespace when it does not exist. Namespaces
// are labelled as managed but never deleted: other things may live there.
func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{providerv1alpha1.ManagedByLabel: ManagedByValue},
	}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// ensure creates want, or updates the existing object of its name: the
// labels and annotations of want are merged in and copySpec copies the rest.
// An existing object not labelled with uid is a conflictError.
func ensure[T client.Object](ctx context.Context, c client.Client, uid, kind string, want T, empty func() T, copySpec func(dst, src T) error) (T, error) {
	obj := empty()
	obj.SetName(want.GetName())
	obj.SetNamespace(want.GetNamespace())
	key := client.ObjectKeyFromObject(obj).String()
	_, err := controllerutil.CreateOrUpdate(ctx, c, obj, func() error {
		if obj.GetResourceVersion() != "" && obj.GetLabels()[RequestUIDLabel] != uid {
			return &conflictError{kind: kind, key: key}
		}
		obj.SetLabels(merged(obj.GetLabels(), want.GetLabels()))
		obj.SetAnnotations(merged(obj.GetAnnotations(), want.GetAnnotations()))
		return copySpec(obj, want)
	})
	if err != nil {
		var conflict *conflictError
		if errors.As(err, &conflict) || errors.Is(err, errRoleRefChanged) {
			return obj, err
		}
		return obj, fmt.Errorf("apply %s %s: %w", kind, key, err)
	}
	return obj, nil
}

// ensureBinding is ensure for bindings, whose roleRef cannot be changed:
// a binding with another roleRef is deleted and created anew.
func ensureBinding[T client.Object](ctx context.Context, c client.Client, uid, kind string, want T, empty func() T, copySpec func(dst, src T) error) error {
	obj, err := ensure(ctx, c, uid, kind, want, empty, copySpec)
	if !errors.Is(err, errRoleRefChanged) {
		return err
	}
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replace %s %s: %w", kind, client.ObjectKeyFromObject(obj), err)
	}
	_, err = ensure(ctx, c, uid, kind, want, empty, copySpec)
	return err
}

func merged(dst, src map[string]string) map[string]string {
	if dst == nil && len(src) > 0 {
		dst = map[string]string{}
	}
	out := maps.Clone(dst)
	maps.Copy(out, src)
	if equality.Semantic.DeepEqual(out, dst) {
		return dst
	}
	return out
}

// deleteLabelled deletes the ServiceAccounts, roles and bindings labelled
// with uid whose "<namespace>/<name>" is not in keep. With an empty keep it
// revokes everything of a request.
func deleteLabelled(ctx context.Context, c client.Client, uid string, keep map[string]bool) error {
	lists := []client.ObjectList{
		// The ServiceAccount first: deleting it invalidates its tokens at
		// once, whatever happens to the rest.
		&corev1.ServiceAccountList{},
		&rbacv1.ClusterRoleBindingList{}, &rbacv1.RoleBindingList{},
		&rbacv1.ClusterRoleList{}, &rbacv1.RoleList{},
	}
	for _, list := range lists {
		if err := c.List(ctx, list, client.MatchingLabels{RequestUIDLabel: uid}); err != nil {
			return fmt.Errorf("list %T: %w", list, err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return fmt.Errorf("read %T: %w", list, err)
		}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok || keep[obj.GetNamespace()+"/"+obj.GetName()] {
				continue
			}
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
			}
		}
	}
	return nil
}
