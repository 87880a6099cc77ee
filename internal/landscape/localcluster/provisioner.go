package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/operator/clusters"
)

// Names this provider gives what it creates.
const (
	// ProviderName is the value of the label clusters.openmcp.cloud/provider
	// on the Clusters and Secrets this provider creates.
	ProviderName = "local"
	// Profile is spec.profile of the Clusters this provider creates.
	Profile = "local"
	// SecretSuffix ends the name of a Cluster's kubeconfig Secret:
	// <cluster>-kubeconfig.
	SecretSuffix = "-kubeconfig"
)

var _ clusters.Provisioner = &Provisioner{}

// Provisioner is the local cluster provider: it gives each ClusterRequest
// it is asked for a fresh kube-apiserver (with a kube-controller-manager)
// on the landscape's etcd, under an etcd prefix of its own, and registers
// it on the platform cluster as an Exclusive Cluster of the request's
// purpose with an admin kubeconfig Secret.
type Provisioner struct {
	cp        *controlplane.ControlPlane
	client    client.Client
	namespace string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	attempts map[types.UID]*attempt
}

// attempt is a cluster being started in the background.
type attempt struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// New returns a Provisioner that runs clusters with cp and registers them
// through c, an uncached client of the platform cluster, in namespace
// (which must exist). Close stops what it is starting.
func New(cp *controlplane.ControlPlane, c client.Client, namespace string) *Provisioner {
	ctx, cancel := context.WithCancel(context.Background())
	return &Provisioner{
		cp:        cp,
		client:    c,
		namespace: namespace,
		ctx:       ctx,
		cancel:    cancel,
		attempts:  map[types.UID]*attempt{},
	}
}

// Close cancels clusters still starting and waits for them; clusters that
// run are left alone (the ControlPlane stops them).
func (p *Provisioner) Close() {
	p.cancel()
	p.wg.Wait()
}

// Provision implements clusters.Provisioner. The first call for a request
// records a cluster for it and starts it in the background; it returns nil
// until the cluster answers and is registered. Registering creates the
// Cluster with the request's finalizer already on it, so that the Cluster
// event makes the ClusterRequest controller grant it at once and no other
// request can take it meanwhile. A failed start is returned as the error of
// the next call, and the call after that tries again.
func (p *Provisioner) Provision(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.attempts[req.UID]; a != nil {
		select {
		case <-a.done:
			delete(p.attempts, req.UID)
			if a.err != nil {
				return nil, a.err
			}
		default:
			return nil, nil
		}
	}
	rec := recordFor(p.cp.Store.Snapshot(), req.UID)
	if rec != nil && rec.Phase == controlplane.ClusterRunning && p.cp.Cluster(rec.Name) != nil {
		return p.registered(ctx, rec, req)
	}
	if rec != nil && rec.Phase == controlplane.ClusterReleasing {
		return nil, fmt.Errorf("cluster %s of ClusterRequest %s/%s is being released", rec.Name, req.Namespace, req.Name)
	}
	// A cluster that never ran gets a fresh record (and port); one that
	// ran keeps its port, which its kubeconfigs name.
	var name string
	if rec != nil && rec.Phase == controlplane.ClusterRunning {
		name = rec.Name
	} else {
		var err error
		if name, err = p.record(req, rec); err != nil {
			return nil, err
		}
	}
	actx, cancel := context.WithCancel(p.ctx)
	a := &attempt{cancel: cancel, done: make(chan struct{})}
	p.attempts[req.UID] = a
	log := logf.FromContext(ctx).WithValues("cluster", name)
	log.Info("Starting local cluster")
	p.wg.Go(func() {
		defer close(a.done)
		defer cancel()
		a.err = p.start(actx, name)
		if a.err != nil {
			log.Error(a.err, "Local cluster did not start")
		}
	})
	return nil, nil
}

// record records a cluster for req (or, for a record whose earlier start
// failed, a fresh port) and returns its name.
func (p *Provisioner) record(req *clustersv1alpha1.ClusterRequest, rec *controlplane.Cluster) (string, error) {
	name := ClusterName(req)
	if rec != nil {
		name = rec.Name
	}
	err := p.cp.Store.Update(func(s *controlplane.State) error {
		// A port nothing listens on and no other cluster has: a cluster
		// that is starting may not listen yet.
		taken := s.Ports()
		var port int
		for port == 0 || taken[port] != "" {
			var err error
			if port, err = controlplane.FreePort(); err != nil {
				return err
			}
		}
		if old := s.Clusters[name]; old != nil && (old.Request == nil || old.Request.UID != string(req.UID)) {
			return fmt.Errorf("cluster name %s is taken", name)
		}
		s.Clusters[name] = &controlplane.Cluster{
			Name:       name,
			Port:       port,
			EtcdPrefix: controlplane.EtcdPrefix(name),
			Kubeconfig: p.cp.Layout.Kubeconfig(name),
			Phase:      controlplane.ClusterStarting,
			Request: &controlplane.RequestRef{
				Namespace: req.Namespace, Name: req.Name, UID: string(req.UID), Purposes: []string{req.Spec.Purpose},
			},
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("record cluster for ClusterRequest %s/%s: %w", req.Namespace, req.Name, err)
	}
	return name, nil
}

// start starts a recorded cluster, registers it and records it as running.
// On failure it stops what it started.
func (p *Provisioner) start(ctx context.Context, name string) error {
	rc, err := p.cp.StartCluster(ctx, name)
	if err != nil {
		return fmt.Errorf("start cluster %s: %w", name, err)
	}
	rec := p.cp.Store.Snapshot().Clusters[name]
	if err := p.register(ctx, rec, rc); err != nil {
		_ = p.cp.StopCluster(name)
		return err
	}
	return p.cp.Store.Update(func(s *controlplane.State) error {
		if r := s.Clusters[name]; r != nil {
			r.Phase = controlplane.ClusterRunning
		}
		return nil
	})
}

// register creates or updates the cluster's kubeconfig Secret and Cluster
// on the platform cluster.
func (p *Provisioner) register(ctx context.Context, rec *controlplane.Cluster, rc *controlplane.RunningCluster) error {
	return Register(ctx, p.client, Registration{
		Namespace:      p.namespace,
		Name:           rec.Name,
		Kubeconfig:     rc.Kubeconfig,
		Purposes:       rec.Request.Purposes,
		Tenancy:        clustersv1alpha1.TenancyExclusive,
		ProvisionedFor: rec.Request.UID,
	})
}

// Registration is a cluster of the landscape as Register writes it to the
// platform cluster.
type Registration struct {
	// Namespace and Name are the Cluster's; its Secret is named
	// <Name>-kubeconfig.
	Namespace, Name string
	// Kubeconfig is the cluster's admin kubeconfig.
	Kubeconfig []byte
	// Purposes and Tenancy go into the Cluster's spec.
	Purposes []string
	Tenancy  clustersv1alpha1.Tenancy
	// ProvisionedFor is the UID of the ClusterRequest the cluster was
	// created for, if any: the Cluster is then created with that
	// request's finalizer and the provisioned-for annotation.
	ProvisionedFor string
}

// Register creates the Secret and the Cluster of r, labelled with
// provider=local and with profile local, or updates the kubeconfig and the
// annotation of existing ones. It leaves everything else of an existing
// Cluster alone (finalizers are the scheduler's, spec is immutable in
// parts).
func Register(ctx context.Context, c client.Client, r Registration) error {
	labels := map[string]string{clustersv1alpha1.ProviderLabel: ProviderName}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.Name + SecretSuffix, Namespace: r.Namespace}}
	if err := c.Get(ctx, client.ObjectKeyFromObject(secret), secret); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("get Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	} else if apierrors.IsNotFound(err) {
		secret.Labels = labels
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = map[string][]byte{clusters.KubeconfigSecretKey: r.Kubeconfig}
		if err := c.Create(ctx, secret); err != nil {
			return fmt.Errorf("create Secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
	} else if !bytes.Equal(secret.Data[clusters.KubeconfigSecretKey], r.Kubeconfig) {
		secret.Data = map[string][]byte{clusters.KubeconfigSecretKey: r.Kubeconfig}
		if err := c.Update(ctx, secret); err != nil {
			return fmt.Errorf("update Secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
	}

	cluster := &clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace}}
	err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
	switch {
	case apierrors.IsNotFound(err):
		cluster.Labels = labels
		cluster.Annotations = map[string]string{clusters.KubeconfigSecretAnnotation: secret.Name}
		if r.ProvisionedFor != "" {
			cluster.Annotations[clusters.ProvisionedForAnnotation] = r.ProvisionedFor
			// The request's finalizer marks the Cluster as taken from
			// the moment it exists (see Provision).
			cluster.Finalizers = []string{clustersv1alpha1.RequestFinalizerOnClusterPrefix + r.ProvisionedFor}
		}
		cluster.Spec = clustersv1alpha1.ClusterSpec{Profile: Profile, Purposes: r.Purposes, Tenancy: r.Tenancy}
		if err := c.Create(ctx, cluster); err != nil {
			return fmt.Errorf("create Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
		}
	case err != nil:
		return fmt.Errorf("get Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	case cluster.Annotations[clusters.KubeconfigSecretAnnotation] != secret.Name:
		before := cluster.DeepCopy()
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[clusters.KubeconfigSecretAnnotation] = secret.Name
		if err := c.Patch(ctx, cluster, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("annotate Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
		}
	}
	return nil
}

// registered returns the Cluster of a running cluster, registering it again
// when someone deleted it.
func (p *Provisioner) registered(ctx context.Context, rec *controlplane.Cluster, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	cluster := &clustersv1alpha1.Cluster{}
	err := p.client.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: rec.Name}, cluster)
	if apierrors.IsNotFound(err) {
		if err := p.register(ctx, rec, p.cp.Cluster(rec.Name)); err != nil {
			return nil, err
		}
		err = p.client.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: rec.Name}, cluster)
	}
	if err != nil {
		return nil, fmt.Errorf("get Cluster %s/%s of ClusterRequest %s/%s: %w", p.namespace, rec.Name, req.Namespace, req.Name, err)
	}
	return cluster, nil
}

// Release implements clusters.Provisioner: it stops the request's cluster
// (cancelling a start under way), deletes its etcd data, its Secret and
// its Cluster, and forgets it. It reports done once the Cluster is gone.
func (p *Provisioner) Release(ctx context.Context, req *clustersv1alpha1.ClusterRequest, cluster *clustersv1alpha1.Cluster) (bool, error) {
	p.mu.Lock()
	a := p.attempts[req.UID]
	delete(p.attempts, req.UID)
	p.mu.Unlock()
	if a != nil {
		a.cancel()
		<-a.done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := recordFor(p.cp.Store.Snapshot(), req.UID)
	if rec == nil {
		// Nothing recorded (e.g. the state directory was removed): only
		// the platform objects can be left, and only ours are deleted.
		if cluster == nil || cluster.Labels[clustersv1alpha1.ProviderLabel] != ProviderName {
			return true, nil
		}
		return p.deleteObjects(ctx, cluster.Name, string(req.UID))
	}
	logf.FromContext(ctx).Info("Releasing local cluster", "cluster", rec.Name)
	return p.release(ctx, rec.Name, rec.Request.UID)
}

// release removes a recorded cluster with everything it has.
func (p *Provisioner) release(ctx context.Context, name, uid string) (bool, error) {
	if err := p.cp.Store.Update(func(s *controlplane.State) error {
		if r := s.Clusters[name]; r != nil {
			r.Phase = controlplane.ClusterReleasing
		}
		return nil
	}); err != nil {
		return false, err
	}
	if err := p.cp.StopCluster(name); err != nil {
		return false, err
	}
	if err := p.cp.DeleteData(ctx, name); err != nil {
		return false, err
	}
	gone, err := p.deleteObjects(ctx, name, uid)
	if err != nil || !gone {
		return false, err
	}
	if err := errors.Join(
		os.RemoveAll(p.cp.Layout.ClusterPKIDir(name)),
		os.Remove(p.cp.Layout.Kubeconfig(name)),
	); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("remove files of cluster %s: %w", name, err)
	}
	return true, p.cp.Store.Update(func(s *controlplane.State) error {
		delete(s.Clusters, name)
		return nil
	})
}

// deleteObjects deletes a cluster's Secret and Cluster on the platform
// cluster and reports whether the Cluster is gone. The finalizer of the
// request uid, for which the cluster was provisioned, is removed (the
// ClusterRequest controller has done so already unless the request
// vanished); finalizers of other requests would keep the Cluster, they
// are left alone and the release is asked again later.
func (p *Provisioner) deleteObjects(ctx context.Context, name, uid string) (bool, error) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + SecretSuffix, Namespace: p.namespace}}
	if err := p.client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("delete Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	cluster := &clustersv1alpha1.Cluster{}
	key := client.ObjectKey{Name: name, Namespace: p.namespace}
	if err := p.client.Get(ctx, key, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("get Cluster %s: %w", key, err)
	}
	before := cluster.DeepCopy()
	if controllerutil.RemoveFinalizer(cluster, clustersv1alpha1.RequestFinalizerOnClusterPrefix+uid) {
		if err := p.client.Patch(ctx, cluster, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("remove finalizer from Cluster %s: %w", key, err)
		}
	}
	if err := p.client.Delete(ctx, cluster); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("delete Cluster %s: %w", key, err)
	}
	err := p.client.Get(ctx, key, cluster)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, client.IgnoreNotFound(err)
}

// Restore brings back, when a landscape starts again, the clusters an
// earlier run provisioned: each one whose ClusterRequest still exists is
// started again (same port, same data) and registered; one whose request
// is gone, or whose release was under way, is released. It runs before the
// operator, so it does not race with Provision or Release.
func (p *Provisioner) Restore(ctx context.Context) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for name, rec := range p.cp.Store.Snapshot().Clusters {
		if rec.Request == nil {
			continue
		}
		wg.Go(func() {
			err := p.restore(ctx, name, rec)
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (p *Provisioner) restore(ctx context.Context, name string, rec *controlplane.Cluster) error {
	keep := rec.Phase != controlplane.ClusterReleasing
	if keep {
		req := &clustersv1alpha1.ClusterRequest{}
		err := p.client.Get(ctx, client.ObjectKey{Namespace: rec.Request.Namespace, Name: rec.Request.Name}, req)
		switch {
		case apierrors.IsNotFound(err):
			keep = false
		case err != nil:
			return fmt.Errorf("get ClusterRequest %s/%s of cluster %s: %w", rec.Request.Namespace, rec.Request.Name, name, err)
		default:
			keep = string(req.UID) == rec.Request.UID
		}
	}
	if !keep {
		if _, err := p.release(ctx, name, rec.Request.UID); err != nil {
			return fmt.Errorf("release cluster %s: %w", name, err)
		}
		return nil
	}
	if err := p.start(ctx, name); err != nil {
		return fmt.Errorf("restart provisioned cluster %s: %w", name, err)
	}
	return nil
}

// ClusterName is the name of the cluster provisioned for req: its purpose
// and a hash of its UID, e.g. mcp-3f2a9c1b04, as every provisioner names
// its Clusters (clusters.ProvisionedClusterName).
func ClusterName(req *clustersv1alpha1.ClusterRequest) string {
	return clusters.ProvisionedClusterName(req)
}

// recordFor returns the record of the cluster provisioned for uid, or nil.
func recordFor(s *controlplane.State, uid types.UID) *controlplane.Cluster {
	for _, c := range s.Clusters {
		if c.Request != nil && c.Request.UID == string(uid) {
			return c
		}
	}
	return nil
}
