package replicate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// LabelReplica marks, on a sister cluster, what the replicator created:
// the replicas (value "true"), whose changes it watches, and the
// namespaces it created for them, which it deletes once they are empty of
// replicas. Whose they are, LabelMaster and LabelOriginal say.
const LabelReplica = "interoperator.marketplane.io/replica"

// SisterClusterID is the spec.clusterId of a replica: Service Fabrik's id
// of the cluster an inter-operator runs on ("1"), under which the sister's
// inter-operator registers its own cluster.
const SisterClusterID = resourcev1alpha1.PrimaryClusterID

// Reasons of the Ready condition of an original.
const (
	// ReasonReplicating: the object is replicated to the sister and waits
	// for the sister's inter-operator.
	ReasonReplicating = "Replicating"
	// ReasonClusterUnreachable: the sister cluster does not answer; the
	// replicator retries with backoff.
	ReasonClusterUnreachable = "ClusterUnreachable"
	// ReasonDeletingReplica: the original waits until its replica is gone.
	ReasonDeletingReplica = "DeletingReplica"
)

// DefaultPollInterval is how often an original whose operation is in
// progress is compared with its replica when no event comes.
const DefaultPollInterval = 10 * time.Second

// FieldOwner is the server-side apply field manager of the CRDs the
// replicator installs on a sister.
const FieldOwner = "marketplane-interoperator-replicator"

// eventBuffer is how many replica events wait for the controllers.
const eventBuffer = 1024

// Replicator replicates instances and bindings to sister clusters. It
// implements provisioner.Replicator and manager.Runnable (it must be added
// to the manager, which stops the caches of the sisters when it stops).
type Replicator struct {
	scheme     *runtime.Scheme
	onboarding client.Client
	platform   cluster.Cluster
	crds       []*apiextensionsv1.CustomResourceDefinition
	poll       time.Duration

	instanceEvents chan event.GenericEvent
	bindingEvents  chan event.GenericEvent

	// base bounds the caches of the sisters; stop cancels it.
	base context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	sisters map[types.NamespacedName]*sister
}

var (
	_ provisioner.Replicator = &Replicator{}
	_ manager.Runnable       = &Replicator{}
)

// sister is one replicate-mode SFCluster: the client it was set up with
// (a new kubeconfig makes a new one), the master identity its cache
// selects the replicas of, and its cache once the CRDs are there.
type sister struct {
	mu      sync.Mutex
	cluster *spruntime.Cluster
	master  master
	ready   bool
	cancel  context.CancelFunc
}

// Option configures a Replicator.
type Option func(*Replicator)

// WithPollInterval sets how often an original in progress is compared with
// its replica without an event (DefaultPollInterval).
func WithPollInterval(d time.Duration) Option {
	return func(r *Replicator) {
		if d > 0 {
			r.poll = d
		}
	}
}

// New returns a Replicator. onboarding is the client of the onboarding
// cluster (bind response Secrets are written there); platform is the
// platform cluster, whose SFClusters say when a sister leaves; crds are the
// CRDs a sister needs, the inter-operator's (interoperator.CRDs).
func New(scheme *runtime.Scheme, onboarding client.Client, platform cluster.Cluster, crds []*apiextensionsv1.CustomResourceDefinition, opts ...Option) *Replicator {
	base, stop := context.WithCancel(context.Background())
	r := &Replicator{
		scheme:         scheme,
		onboarding:     onboarding,
		platform:       platform,
		crds:           crds,
		poll:           DefaultPollInterval,
		instanceEvents: make(chan event.GenericEvent, eventBuffer),
		bindingEvents:  make(chan event.GenericEvent, eventBuffer),
		base:           base,
		stop:           stop,
		sisters:        map[types.NamespacedName]*sister{},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// InstanceEvents is the source of the instance controller: an original
// for every change of its replica. Call it once.
func (r *Replicator) InstanceEvents() source.Source {
	return source.Channel(r.instanceEvents, &handler.EnqueueRequestForObject{})
}

// BindingEvents is the source of the binding controller. Call it once.
func (r *Replicator) BindingEvents() source.Source {
	return source.Channel(r.bindingEvents, &handler.EnqueueRequestForObject{})
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the
// replicator only stops caches; it runs wherever the controllers run.
func (r *Replicator) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it forgets a sister when its SFCluster
// is deleted or leaves the replicate mode, and stops every sister's cache
// when ctx ends.
func (r *Replicator) Start(ctx context.Context) error {
	defer r.stopAll()
	inf, err := r.platform.GetCache().GetInformer(ctx, &resourcev1alpha1.SFCluster{})
	if err != nil {
		return fmt.Errorf("replicator: watch SFClusters: %w", err)
	}
	forget := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if sfc, ok := obj.(*resourcev1alpha1.SFCluster); ok {
			r.Forget(sfc.Namespace, sfc.Name)
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if sfc, ok := obj.(*resourcev1alpha1.SFCluster); ok && sfc.Spec.ProvisioningMode != resourcev1alpha1.ProvisioningReplicate {
				forget(obj)
			}
		},
		DeleteFunc: forget,
	})
	if err != nil {
		return fmt.Errorf("replicator: watch SFClusters: %w", err)
	}
	<-ctx.Done()
	_ = inf.RemoveEventHandler(reg)
	return nil
}

// Forget stops the cache of the sister registered as the SFCluster name in
// namespace; the next replication to it starts a new one.
func (r *Replicator) Forget(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	r.mu.Lock()
	s := r.sisters[key]
	delete(r.sisters, key)
	r.mu.Unlock()
	if s != nil {
		s.stopCache()
	}
}

// Watching reports whether a cache of the sister registered as the
// SFCluster name in namespace runs.
func (r *Replicator) Watching(namespace, name string) bool {
	r.mu.Lock()
	s := r.sisters[types.NamespacedName{Namespace: namespace, Name: name}]
	r.mu.Unlock()
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

func (r *Replicator) stopAll() {
	r.stop()
	r.mu.Lock()
	all := r.sisters
	r.sisters = map[types.NamespacedName]*sister{}
	r.mu.Unlock()
	for _, s := range all {
		s.stopCache()
	}
}

func (s *sister) stopCache() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
	s.ready = false
}

// sister returns the client of the sister of cc, registered in the catalog
// namespace, after making sure that the CRDs are there and that the
// replicas of master m are watched.
func (r *Replicator) sister(ctx context.Context, catalog string, m master, cc spruntime.ClusterContext) (client.Client, error) {
	if cc.WorkloadCluster == nil {
		return nil, errors.New("no sister cluster")
	}
	key := types.NamespacedName{Namespace: catalog, Name: cc.WorkloadCluster.Name()}
	r.mu.Lock()
	s := r.sisters[key]
	if s == nil || s.cluster != cc.WorkloadCluster || s.master != m {
		// New, or the registry has a new client because the kubeconfig
		// changed: the old cache watches with stale credentials; or the
		// ProviderConfig was created again, and the cache selects
		// another master's replicas.
		if s != nil {
			go s.stopCache()
		}
		s = &sister{cluster: cc.WorkloadCluster, master: m}
		r.sisters[key] = s
	}
	r.mu.Unlock()

	c := cc.WorkloadCluster.Client()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready {
		return c, nil
	}
	if err := r.installCRDs(ctx, c); err != nil {
		return nil, err
	}
	cancel, err := r.watch(cc.WorkloadCluster.RESTConfig(), m)
	if err != nil {
		return nil, err
	}
	s.cancel, s.ready = cancel, true
	logf.FromContext(ctx).V(1).Info("Watching the replicas of a sister cluster", "sfcluster", key.Name)
	return c, nil
}

// installCRDs installs the CRDs the sister lacks. Those it has are left
// alone: the sister's own inter-operator may be newer.
func (r *Replicator) installCRDs(ctx context.Context, c client.Client) error {
	n, err := crdinstall.ApplyMissing(ctx, c, FieldOwner, 0, r.crds...)
	if err != nil {
		return fmt.Errorf("install the CRDs: %w", err)
	}
	if n > 0 {
		logf.FromContext(ctx).Info("Installed the CRDs on a sister cluster", "count", n)
	}
	return nil
}

// watch starts a cache of the replicas of master m on the cluster of cfg
// and returns its stop function. Other masters' replicas, which may have
// the names of m's originals, are not in it, so their changes wake no
// original.
func (r *Replicator) watch(cfg *rest.Config, m master) (context.CancelFunc, error) {
	replicas := labels.SelectorFromSet(labels.Set{LabelReplica: "true", LabelMaster: string(m)})
	c, err := cache.New(rest.CopyConfig(cfg), cache.Options{
		Scheme: r.scheme,
		ByObject: map[client.Object]cache.ByObject{
			&osbv1alpha1.SFServiceInstance{}: {Label: replicas},
			&osbv1alpha1.SFServiceBinding{}:  {Label: replicas},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cache of the replicas: %w", err)
	}
	ctx, cancel := context.WithCancel(r.base)
	for _, w := range []struct {
		obj    client.Object
		events chan event.GenericEvent
		empty  func() client.Object
	}{
		{&osbv1alpha1.SFServiceInstance{}, r.instanceEvents, func() client.Object { return &osbv1alpha1.SFServiceInstance{} }},
		{&osbv1alpha1.SFServiceBinding{}, r.bindingEvents, func() client.Object { return &osbv1alpha1.SFServiceBinding{} }},
	} {
		// Before the cache starts, GetInformer registers the informer
		// without waiting for it.
		inf, err := c.GetInformer(ctx, w.obj)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("watch %T: %w", w.obj, err)
		}
		send := func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			replica, ok := obj.(client.Object)
			if !ok {
				return
			}
			// The original has the replica's namespace and name; the
			// controller compares the UIDs.
			original := w.empty()
			original.SetNamespace(replica.GetNamespace())
			original.SetName(replica.GetName())
			select {
			case w.events <- event.GenericEvent{Object: original}:
			case <-ctx.Done():
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    send,
			UpdateFunc: func(_, obj any) { send(obj) },
			DeleteFunc: send,
		}); err != nil {
			cancel()
			return nil, fmt.Errorf("watch %T: %w", w.obj, err)
		}
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			ctrl.Log.WithName("replicate").Error(err, "The cache of a sister cluster stopped")
		}
	}()
	return cancel, nil
}

// deleteReplica deletes the replica of the original with uid at key on
// the sister c, read into replica, unless it is already being deleted, and
// reports whether it is gone (a sister without the kind has none). An
// object at key that is not the original's replica (another master's,
// another original's, the sister's own; an earlier replicator's outside
// a namespace of this master's) is left alone and counts as gone.
func (m master) deleteReplica(ctx context.Context, c client.Client, key client.ObjectKey, uid types.UID, replica client.Object) (gone bool, err error) {
	if err := c.Get(ctx, key, replica); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return true, nil
		}
		return false, fmt.Errorf("get the replica: %w", err)
	}
	switch replicaOf(replica.GetLabels(), uid) {
	case foreign:
		logf.FromContext(ctx).V(1).Info("Leaving an object that is not the replica alone", "kind", fmt.Sprintf("%T", replica), "name", key.Name)
		return true, nil
	case legacy:
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: key.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("get namespace %s: %w", key.Namespace, err)
		}
		if m.namespaceOf(ns.Labels) == foreign {
			logf.FromContext(ctx).V(1).Info("Leaving an object in another's namespace alone", "kind", fmt.Sprintf("%T", replica), "name", key.Name)
			return true, nil
		}
	}
	if replica.GetDeletionTimestamp() == nil {
		// The precondition keeps an object that replaced the one read
		// from being deleted in its place.
		uid := replica.GetUID()
		if err := c.Delete(ctx, replica, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, fmt.Errorf("delete the replica: %w", err)
		}
		logf.FromContext(ctx).V(1).Info("Deleting the replica", "kind", fmt.Sprintf("%T", replica), "name", key.Name)
	}
	return false, nil
}

// unreachable handles an error of the sister: when it did not answer, obj
// reports that (Ready=False, ReasonClusterUnreachable) and the error is
// retried with backoff; any other error is returned as it is.
func unreachable(obj spruntime.API, cluster string, deleting bool, err error, description *string) error {
	if !clusters.Unreachable(err) {
		return err
	}
	msg := fmt.Sprintf("The SFCluster %s is unreachable; retrying: %v", cluster, err)
	if deleting {
		spruntime.StatusTerminatingWithReason(obj, ReasonClusterUnreachable, msg)
	} else {
		spruntime.StatusProgressing(obj, ReasonClusterUnreachable, msg)
	}
	if description != nil {
		*description = msg
	}
	return fmt.Errorf("SFCluster %s is unreachable: %w", cluster, err)
}
