package kcpprovider

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

// SecretName returns the name of a Cluster's kubeconfig Secret.
func SecretName(cluster *clustersv1alpha1.Cluster) string {
	return cluster.Name + SecretSuffix
}

// getSecret reads the Cluster's kubeconfig Secret, nil when there is none.
func (r *Reconciler) getSecret(ctx context.Context, cluster *clustersv1alpha1.Cluster) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: SecretName(cluster)}
	if err := r.reader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get Secret %s: %w", key, err)
	}
	return secret, nil
}

// renewAt returns when the Secret's token is due for renewal: after
// RenewFraction of its life. It returns false for a Secret that does not
// hold a current kubeconfig of ws (none, another workspace or server, or
// no token times).
func renewAt(secret *corev1.Secret, path string, ws *workspace) (time.Time, bool) {
	if secret == nil || len(secret.Data[clustersv1alpha1.SecretKeyKubeconfig]) == 0 ||
		secret.Annotations[WorkspaceAnnotation] != path ||
		secret.Annotations[LogicalClusterAnnotation] != ws.LogicalCluster ||
		string(secret.Data[clustersv1alpha1.SecretKeyHost]) != ws.URL {
		return time.Time{}, false
	}
	issued, err1 := strconv.ParseInt(string(secret.Data[clustersv1alpha1.SecretKeyCreationTimestamp]), 10, 64)
	expires, err2 := strconv.ParseInt(string(secret.Data[clustersv1alpha1.SecretKeyExpirationTimestamp]), 10, 64)
	if err1 != nil || err2 != nil || expires <= issued {
		return time.Time{}, false
	}
	life := time.Duration(expires-issued) * time.Second
	return time.Unix(issued, 0).Add(time.Duration(float64(life) * RenewFraction)), true
}

// kubeconfig returns an admin kubeconfig of the workspace at url with tok.
func (r *Reconciler) kubeconfig(contextName, url, tok string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: r.caData, InsecureSkipTLSVerify: r.kcp.Insecure}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{Token: tok}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig: %w", err)
	}
	return data, nil
}

// writeSecret creates or updates the Cluster's kubeconfig Secret, owned by
// the Cluster, with a kubeconfig of ws holding tok.
func (r *Reconciler) writeSecret(ctx context.Context, cluster *clustersv1alpha1.Cluster, old *corev1.Secret, path string, ws *workspace, tok *token) error {
	kc, err := r.kubeconfig(cluster.Name, ws.URL, tok.value)
	if err != nil {
		return err
	}
	secret := old
	if secret == nil {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: SecretName(cluster), Namespace: cluster.Namespace},
			Type:       corev1.SecretTypeOpaque,
		}
	}
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[clustersv1alpha1.ProviderLabel] = r.providerName
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[WorkspaceAnnotation] = path
	secret.Annotations[LogicalClusterAnnotation] = ws.LogicalCluster
	secret.Data = map[string][]byte{
		clustersv1alpha1.SecretKeyKubeconfig:          kc,
		clustersv1alpha1.SecretKeyHost:                []byte(ws.URL),
		clustersv1alpha1.SecretKeyCreationTimestamp:   []byte(strconv.FormatInt(tok.issued.Unix(), 10)),
		clustersv1alpha1.SecretKeyExpirationTimestamp: []byte(strconv.FormatInt(tok.expires.Unix(), 10)),
	}
	if len(r.caData) > 0 {
		secret.Data[clustersv1alpha1.SecretKeyCA] = bytes.Clone(r.caData)
	}
	if err := controllerutil.SetControllerReference(cluster, secret, r.platform.Scheme()); err != nil {
		return fmt.Errorf("own Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	if old == nil {
		if err := r.platform.Create(ctx, secret); err != nil {
			return fmt.Errorf("create Secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
		return nil
	}
	if err := r.platform.Update(ctx, secret); err != nil {
		return fmt.Errorf("update Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

// deleteSecret deletes the Cluster's kubeconfig Secret if this provider
// wrote it.
func (r *Reconciler) deleteSecret(ctx context.Context, cluster *clustersv1alpha1.Cluster) error {
	secret, err := r.getSecret(ctx, cluster)
	if err != nil || secret == nil || secret.Labels[clustersv1alpha1.ProviderLabel] != r.providerName {
		return err
	}
	if err := r.platform.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}
