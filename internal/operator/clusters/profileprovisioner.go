package clusters

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/pkg/providerrequests"
)

// ErrNoProvisioner is returned by a Provisioner that creates no clusters of
// the request's purpose: the request is then treated as if there were no
// Provisioner at all (Denied when no registered cluster is free).
var ErrNoProvisioner = errors.New("no cluster provider creates clusters of this purpose")

var _ Provisioner = &ProfileProvisioner{}

// ProfileProvisioner creates, for a request of a purpose it has a
// ClusterProfile for, a Cluster of that profile on the platform cluster and
// leaves the rest to the profile's ClusterProvider: it makes the cluster
// (for kcp, a workspace), writes its admin kubeconfig Secret and removes it
// again when the Cluster is deleted.
//
// The Cluster goes into the namespace the operator creates for that
// ClusterProvider (cp-<name>), where the provider's run role may update
// Clusters and keep Secrets: the provider needs no rights in the
// operator's namespace, which holds the kubeconfigs of other clusters.
type ProfileProvisioner struct {
	client   client.Client
	profiles map[string]string
}

// NewProfileProvisioner returns a Provisioner that creates Clusters through
// c, a client of the platform cluster; profiles maps a purpose to the name
// of the ClusterProfile its clusters get.
func NewProfileProvisioner(c client.Client, profiles map[string]string) Provisioner {
	return &ProfileProvisioner{client: c, profiles: maps.Clone(profiles)}
}

// Provision implements Provisioner. It creates the Cluster, in the
// namespace of the profile's ClusterProvider, with the request's finalizer
// and ProvisionedForAnnotation already on it, so that no other request can
// take it, and returns it at once: the ClusterProvider makes it Ready, and
// those who use it wait for that. A missing ClusterProfile, or a missing
// namespace of its ClusterProvider, is an error naming it (the request
// stays Pending and is retried with backoff).
func (p *ProfileProvisioner) Provision(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	profile, ok := p.profiles[req.Spec.Purpose]
	if !ok {
		return nil, fmt.Errorf("purpose %q: %w", req.Spec.Purpose, ErrNoProvisioner)
	}
	namespace, err := p.providerNamespace(ctx, profile, req.Spec.Purpose)
	if err != nil {
		return nil, err
	}
	key := client.ObjectKey{Namespace: namespace, Name: ProvisionedClusterName(req)}
	cluster := &clustersv1alpha1.Cluster{}
	err = p.client.Get(ctx, key, cluster)
	switch {
	case err == nil:
		if cluster.Annotations[ProvisionedForAnnotation] != string(req.UID) {
			return nil, fmt.Errorf("cluster name %s is taken by a Cluster not provisioned for ClusterRequest %s/%s", key, req.Namespace, req.Name)
		}
		return cluster, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get Cluster %s: %w", key, err)
	}
	cluster = &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name:        key.Name,
			Namespace:   key.Namespace,
			Annotations: map[string]string{ProvisionedForAnnotation: string(req.UID)},
			// The request's finalizer marks the Cluster as taken from the
			// moment it exists.
			Finalizers: []string{req.FinalizerForCluster()},
		},
		Spec: clustersv1alpha1.ClusterSpec{
			Profile:  profile,
			Purposes: []string{req.Spec.Purpose},
			Tenancy:  clustersv1alpha1.TenancyExclusive,
		},
	}
	if err := p.client.Create(ctx, cluster); err != nil {
		return nil, fmt.Errorf("create Cluster %s of profile %s: %w", key, profile, err)
	}
	logf.FromContext(ctx).Info("Created Cluster", "cluster", key, "profile", profile, "purpose", req.Spec.Purpose)
	return cluster, nil
}

// providerNamespace returns the namespace of the ClusterProvider that
// profile names, once it exists: the operator creates it when it deploys
// the provider.
func (p *ProfileProvisioner) providerNamespace(ctx context.Context, profile, purpose string) (string, error) {
	prof := &clustersv1alpha1.ClusterProfile{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: profile}, prof); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("ClusterProfile %q, configured for purpose %q, does not exist", profile, purpose)
		}
		return "", fmt.Errorf("get ClusterProfile %q: %w", profile, err)
	}
	provider := prof.Spec.ProviderRef.Name
	namespace, _ := providerrequests.Namespace("ClusterProvider", provider)
	if err := p.client.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{}); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("namespace %s of ClusterProvider %q (named by ClusterProfile %q) does not exist: is the provider deployed?", namespace, provider, profile)
		}
		return "", fmt.Errorf("get namespace %s of ClusterProvider %q: %w", namespace, provider, err)
	}
	return namespace, nil
}

// Release implements Provisioner: it deletes the Cluster provisioned for req
// (after removing req's finalizer, should it still be there) and reports done
// once the Cluster is gone. The ClusterProvider's own finalizer keeps it
// until the cluster behind it is deleted.
func (p *ProfileProvisioner) Release(ctx context.Context, req *clustersv1alpha1.ClusterRequest, cluster *clustersv1alpha1.Cluster) (bool, error) {
	if cluster == nil {
		found, err := p.provisionedFor(ctx, req)
		if err != nil || found == nil {
			return found == nil && err == nil, err
		}
		cluster = found
	}
	key := client.ObjectKeyFromObject(cluster)
	cluster = &clustersv1alpha1.Cluster{}
	if err := p.client.Get(ctx, key, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("get Cluster %s: %w", key, err)
	}
	if cluster.Annotations[ProvisionedForAnnotation] != string(req.UID) {
		// Not ours to delete.
		return true, nil
	}
	before := cluster.DeepCopy()
	if controllerutil.RemoveFinalizer(cluster, req.FinalizerForCluster()) {
		if err := p.client.Patch(ctx, cluster, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("remove finalizer from Cluster %s: %w", key, err)
		}
	}
	if cluster.DeletionTimestamp.IsZero() {
		if err := p.client.Delete(ctx, cluster); err != nil {
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("delete Cluster %s: %w", key, err)
		}
		logf.FromContext(ctx).Info("Deleting Cluster", "cluster", key, "profile", cluster.Spec.Profile)
	}
	err := p.client.Get(ctx, key, &clustersv1alpha1.Cluster{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get Cluster %s: %w", key, err)
	}
	return false, nil
}

// provisionedFor finds the Cluster provisioned for req when the request
// never learnt it (Provision may have created it just before the request
// was deleted): the Cluster of its name, in any namespace, that carries
// its UID. The namespace is not derived again from the profile, which may
// have changed since. It returns nil when there is none.
func (p *ProfileProvisioner) provisionedFor(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	list := &clustersv1alpha1.ClusterList{}
	if err := p.client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list Clusters to find the one provisioned for ClusterRequest %s/%s: %w", req.Namespace, req.Name, err)
	}
	name := ProvisionedClusterName(req)
	for i := range list.Items {
		if list.Items[i].Name == name && list.Items[i].Annotations[ProvisionedForAnnotation] == string(req.UID) {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// ProvisionedClusterName is the name of the Cluster provisioned for req: its
// purpose and a hash of its UID, e.g. mcp-3f2a9c1b04. The UID, not the
// request's name, makes it unique: a request deleted and created again gets
// a new cluster.
func ProvisionedClusterName(req *clustersv1alpha1.ClusterRequest) string {
	sum := sha256.Sum256([]byte(req.UID))
	purpose := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, req.Spec.Purpose)
	purpose = strings.Trim(purpose, "-")
	if len(purpose) > 20 {
		purpose = strings.TrimRight(purpose[:20], "-")
	}
	if purpose == "" {
		purpose = "cluster"
	}
	return purpose + "-" + hex.EncodeToString(sum[:5])
}
