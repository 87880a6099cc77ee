package kcpprovider

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// token is a workspace admin token and its lifetime.
type token struct {
	value           string
	issued, expires time.Time
}

// issueToken sets up the admin identity inside the workspace served at url
// (namespace, ServiceAccount, ClusterRoleBinding to cluster-admin) and
// returns a fresh token of it.
func (r *Reconciler) issueToken(ctx context.Context, url string) (*token, error) {
	cfg := rest.CopyConfig(r.kcp)
	cfg.Host = url
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client of workspace %s: %w", url, err)
	}
	if err := ensureAdmin(ctx, cs); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", url, err)
	}
	seconds := int64(r.tokenLifetime / time.Second)
	issued := r.now()
	tr, err := cs.CoreV1().ServiceAccounts(AdminNamespace).CreateToken(ctx, AdminServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request token of ServiceAccount %s/%s in workspace %s: %w", AdminNamespace, AdminServiceAccount, url, err)
	}
	expires := tr.Status.ExpirationTimestamp.Time
	if !expires.After(issued) {
		expires = issued.Add(r.tokenLifetime)
	}
	return &token{value: tr.Status.Token, issued: issued, expires: expires}, nil
}

// ensureAdmin creates the admin namespace, ServiceAccount and
// ClusterRoleBinding where they are missing.
func ensureAdmin(ctx context.Context, cs kubernetes.Interface) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: AdminNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", AdminNamespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: AdminServiceAccount, Namespace: AdminNamespace}}
	if _, err := cs.CoreV1().ServiceAccounts(AdminNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ServiceAccount %s/%s: %w", AdminNamespace, AdminServiceAccount, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: AdminBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: AdminServiceAccount, Namespace: AdminNamespace}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRoleBinding %s: %w", AdminBinding, err)
	}
	return nil
}
