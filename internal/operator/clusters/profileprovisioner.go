package clusters

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
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
type ProfileProvisioner struct {
	client    client.Client
	namespace string
	profiles  map[string]string
}

// NewProfileProvisioner returns a Provisioner that creates Clusters in
// namespace through c, a client of the platform cluster; profiles maps a
// purpose to the name of the ClusterProfile its clusters get.
func NewProfileProvisioner(c client.Client, namespace string, profiles map[string]string) Provisioner {
	p := &ProfileProvisioner{client: c, namespace: namespace, profiles: map[string]string{}}
	for purpose, profile := range profiles {
		p.profiles[purpose] = profile
	}
	return p
}

// Provision implements Provisioner. It creates the Cluster with the
// request's finalizer and ProvisionedForAnnotation already on it, so that
// no other request can take it, and returns it at once: the ClusterProvider
// makes it Ready, and those who use it wait for that. A missing
// ClusterProfile is an error naming it (the request stays Pending and is
// retried with backoff).
func (p *ProfileProvisioner) Provision(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	profile, ok := p.profiles[req.Spec.Purpose]
	if !ok {
		return nil, fmt.Errorf("purpose %q: %w", req.Spec.Purpose, ErrNoProvisioner)
	}
	key := client.ObjectKey{Namespace: p.namespace, Name: ProvisionedClusterName(req)}
	cluster := &clustersv1alpha1.Cluster{}
	err := p.client.Get(ctx, key, cluster)
	switch {
	case err == nil:
		if cluster.Annotations[ProvisionedForAnnotation] != string(req.UID) {
			return nil, fmt.Errorf("cluster name %s is taken by a Cluster not provisioned for ClusterRequest %s/%s", key, req.Namespace, req.Name)
		}
		return cluster, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get Cluster %s: %w", key, err)
	}
	if err := p.client.Get(ctx, client.ObjectKey{Name: profile}, &clustersv1alpha1.ClusterProfile{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("ClusterProfile %q, configured for purpose %q, does not exist", profile, req.Spec.Purpose)
		}
		return nil, fmt.Errorf("get ClusterProfile %q: %w", profile, err)
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

// Release implements Provisioner: it deletes the Cluster provisioned for req
// (after removing req's finalizer, should it still be there) and reports done
// once the Cluster is gone. The ClusterProvider's own finalizer keeps it
// until the cluster behind it is deleted.
func (p *ProfileProvisioner) Release(ctx context.Context, req *clustersv1alpha1.ClusterRequest, cluster *clustersv1alpha1.Cluster) (bool, error) {
	key := client.ObjectKey{Namespace: p.namespace, Name: ProvisionedClusterName(req)}
	if cluster != nil {
		key = client.ObjectKeyFromObject(cluster)
	}
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
