package access

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// ServiceAccountName returns the name of the ServiceAccount of an
// AccessRequest that the access policy does not police (outside provider
// and MCP namespaces): "ar-" and 16 hex digits of the SHA-256 of its UID,
// so that it is unique per request (also across platforms sharing a
// target) and reveals nothing about the request's name.
func ServiceAccountName(ar *clustersv1alpha1.AccessRequest) string {
	sum := sha256.Sum256([]byte(ar.UID))
	return "ar-" + hex.EncodeToString(sum[:])[:16]
}

// ServiceAccountNameFor returns the name of the ServiceAccount of an
// AccessRequest of the provider providerID (ProviderID):
// "<ServiceAccountName>.<providerID>". The admission policies on the target
// (admission.go) know a provider's requests, and which provider they
// belong to, by this name; the requests of the MCP controller and other
// platform components, named without a ".", are not limited by them. An
// empty providerID gives ServiceAccountName.
func ServiceAccountNameFor(ar *clustersv1alpha1.AccessRequest, providerID string) string {
	if providerID == "" {
		return ServiceAccountName(ar)
	}
	return ServiceAccountName(ar) + "." + providerID
}

// BinderMarker ends the first part of the ServiceAccount name of a request
// whose provider may bind roles to ServiceAccounts of its own on an MCP
// (ownership.binder): "<ServiceAccountName>-binder.<providerID>". The
// admission policies read it from the name, since they cannot read the
// provider's access policy; only the controller writes ServiceAccounts in
// the access namespace, so no provider can give itself the name.
const BinderMarker = "-binder"

// BinderServiceAccountNameFor is ServiceAccountNameFor for a request whose
// provider may bind roles to ServiceAccounts of its own.
func BinderServiceAccountNameFor(ar *clustersv1alpha1.AccessRequest, providerID string) string {
	return ServiceAccountName(ar) + BinderMarker + "." + providerID
}

// serviceAccountNameOf returns the name of the request's ServiceAccount for
// the ownership own.
func serviceAccountNameOf(ar *clustersv1alpha1.AccessRequest, own ownership) string {
	if own.binder && own.owner != "" {
		return BinderServiceAccountNameFor(ar, own.owner)
	}
	return ServiceAccountNameFor(ar, own.owner)
}

// SecretName returns the name of the kubeconfig Secret of an AccessRequest:
// "<name>.kubeconfig", shortened with a hash when that would be too long.
func SecretName(ar *clustersv1alpha1.AccessRequest) string {
	const suffix = ".kubeconfig"
	const maxLen = 253
	name := ar.Name + suffix
	if len(name) <= maxLen {
		return name
	}
	sum := sha256.Sum256([]byte(ar.Name))
	h := hex.EncodeToString(sum[:])[:10]
	return ar.Name[:maxLen-len(suffix)-len(h)-1] + "-" + h + suffix
}

// targetObjects is everything an AccessRequest needs on its target cluster.
type targetObjects struct {
	serviceAccount *corev1.ServiceAccount
	// createNamespaces are created when missing; requireNamespaces must
	// exist already.
	createNamespaces, requireNamespaces []string
	// roles and clusterRoles are created from spec.token.permissions.
	roles        []*rbacv1.Role
	clusterRoles []*rbacv1.ClusterRole
	// roleBindings and clusterRoleBindings bind the ServiceAccount to the
	// created roles and to spec.token.roleRefs.
	roleBindings        []*rbacv1.RoleBinding
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
}

// desiredObjects computes the target objects of a token AccessRequest of
// the provider own.owner (empty for an unpoliced request).
// Generated names are "<ServiceAccountName>-p<i>" for the role and binding
// of permissions[i] and "<ServiceAccountName>-r<i>" for the binding of
// roleRefs[i]; a permission's own name, when given, names its role.
func desiredObjects(ar *clustersv1alpha1.AccessRequest, accessNamespace string, own ownership) targetObjects {
	sa := serviceAccountNameOf(ar, own)
	meta := func(name, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name:        name,
			Namespace:   namespace,
			Labels:      targetLabels(ar),
			Annotations: map[string]string{RequestAnnotation: ar.Namespace + "/" + ar.Name},
		}
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: accessNamespace}}
	out := targetObjects{serviceAccount: &corev1.ServiceAccount{ObjectMeta: meta(sa, accessNamespace)}}
	if ar.Spec.Token == nil {
		return out
	}
	var create, require []string
	for i, p := range ar.Spec.Token.Permissions {
		generated := fmt.Sprintf("%s-p%d", sa, i)
		roleName := p.Name
		if roleName == "" {
			roleName = generated
		}
		rules := slices.Clone(p.Rules)
		if p.Namespace == "" {
			out.clusterRoles = append(out.clusterRoles, &rbacv1.ClusterRole{ObjectMeta: meta(roleName, ""), Rules: rules})
			out.clusterRoleBindings = append(out.clusterRoleBindings, &rbacv1.ClusterRoleBinding{
				ObjectMeta: meta(generated, ""),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
				Subjects:   subjects,
			})
			continue
		}
		if p.DisableAutomaticNamespaceCreation {
			require = append(require, p.Namespace)
		} else {
			create = append(create, p.Namespace)
		}
		out.roles = append(out.roles, &rbacv1.Role{ObjectMeta: meta(roleName, p.Namespace), Rules: rules})
		out.roleBindings = append(out.roleBindings, &rbacv1.RoleBinding{
			ObjectMeta: meta(generated, p.Namespace),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
			Subjects:   subjects,
		})
	}
	for i, ref := range ar.Spec.Token.RoleRefs {
		name := fmt.Sprintf("%s-r%d", sa, i)
		if ref.Kind == common.RoleKindClusterRole {
			out.clusterRoleBindings = append(out.clusterRoleBindings, &rbacv1.ClusterRoleBinding{
				ObjectMeta: meta(name, ""),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ref.Name},
				Subjects:   subjects,
			})
			continue
		}
		require = append(require, ref.Namespace)
		out.roleBindings = append(out.roleBindings, &rbacv1.RoleBinding{
			ObjectMeta: meta(name, ref.Namespace),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ref.Name},
			Subjects:   subjects,
		})
	}
	out.createNamespaces = uniqueSorted(create)
	out.requireNamespaces = slices.DeleteFunc(uniqueSorted(require), func(ns string) bool {
		return slices.Contains(out.createNamespaces, ns)
	})
	return out
}

// targetLabels are the labels of every object created on the target for ar.
func targetLabels(ar *clustersv1alpha1.AccessRequest) map[string]string {
	return map[string]string{
		providerv1alpha1.ManagedByLabel: ManagedByValue,
		RequestUIDLabel:                 string(ar.UID),
	}
}

func uniqueSorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
