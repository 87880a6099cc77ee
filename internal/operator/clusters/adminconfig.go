package clusters

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/pkg/kubeconfig"
)

// Errors AdminConfig wraps, so that callers can turn them into condition
// reasons with errors.Is. Any other error AdminConfig returns is transient
// (reading the Secret failed) and worth a retry.
var (
	// ErrKubeconfigMissing: the Cluster names no Secret, or the Secret or
	// its kubeconfig key does not exist.
	ErrKubeconfigMissing = errors.New("kubeconfig missing")
	// ErrKubeconfigInvalid: the Secret's kubeconfig cannot be used.
	ErrKubeconfigInvalid = errors.New("kubeconfig invalid")
)

// ReasonFor returns the condition reason for an error of AdminConfig, and
// false for an error that is not a user error.
func ReasonFor(err error) (Reason, bool) {
	switch {
	case errors.Is(err, ErrKubeconfigMissing):
		return ReasonKubeconfigMissing, true
	case errors.Is(err, ErrKubeconfigInvalid):
		return ReasonKubeconfigInvalid, true
	}
	return "", false
}

// KubeconfigSecretName returns where the admin kubeconfig of cluster lives:
// the Secret named by KubeconfigSecretAnnotation in the Cluster's namespace.
// It returns false when the annotation is missing or empty.
func KubeconfigSecretName(cluster *clustersv1alpha1.Cluster) (types.NamespacedName, bool) {
	name := cluster.Annotations[KubeconfigSecretAnnotation]
	if name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: cluster.Namespace, Name: name}, true
}

// AdminConfig returns an admin REST config for cluster, read from the
// kubeconfig Secret the Cluster names (see KubeconfigSecretAnnotation). The
// reader is a client of the platform cluster.
//
// A missing annotation, Secret or key wraps ErrKubeconfigMissing; a
// kubeconfig that cannot be parsed, has no server, or needs an exec or
// auth-provider plugin (which would run a command chosen by whoever can
// write the Secret inside the operator) wraps ErrKubeconfigInvalid. Error
// messages never contain the kubeconfig's content.
func AdminConfig(ctx context.Context, c client.Reader, cluster *clustersv1alpha1.Cluster) (*rest.Config, error) {
	key, ok := KubeconfigSecretName(cluster)
	if !ok {
		return nil, fmt.Errorf("%w: Cluster %s/%s has no annotation %s", ErrKubeconfigMissing, cluster.Namespace, cluster.Name, KubeconfigSecretAnnotation)
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s not found", ErrKubeconfigMissing, key)
		}
		return nil, fmt.Errorf("get kubeconfig Secret %s: %w", key, err)
	}
	data := secret.Data[KubeconfigSecretKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: Secret %s has no key %q", ErrKubeconfigMissing, key, KubeconfigSecretKey)
	}
	cfg, err := kubeconfig.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s key %q: %w", ErrKubeconfigInvalid, key, KubeconfigSecretKey, err)
	}
	return cfg, nil
}
