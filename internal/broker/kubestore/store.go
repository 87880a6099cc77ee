package kubestore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker"
)

// Store keeps instances and bindings as SFServiceInstances and
// SFServiceBindings on the onboarding cluster. Cached reads come from an
// informer cache of both kinds (managed fields stripped), falling back to
// the API server for objects the cache does not hold yet; fresh reads,
// writes and Secret reads go to the API server.
type Store struct {
	cache  cache.Cache
	client client.Client
}

var _ broker.Store = &Store{}

// CacheOptions returns the options of the cache a Store reads from: every
// namespace, SFServiceInstances and SFServiceBindings without managed
// fields. Secrets are never cached.
func CacheOptions(opts cache.Options) cache.Options {
	opts.DefaultTransform = cache.TransformStripManagedFields()
	return opts
}

// New returns a Store reading through c (an informer cache the caller
// starts) and writing through cl (a client without cache).
func New(c cache.Cache, cl client.Client) *Store {
	return &Store{cache: c, client: cl}
}

// Informers registers the informers the Store reads from, so that they sync
// before the broker serves. Call it before starting the cache's sync wait.
func (s *Store) Informers(ctx context.Context) error {
	for _, obj := range []client.Object{&osbv1alpha1.SFServiceInstance{}, &osbv1alpha1.SFServiceBinding{}} {
		if _, err := s.cache.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
	}
	return nil
}

// Get implements broker.Store.
func (s *Store) Get(ctx context.Context, key client.ObjectKey, obj client.Object, read broker.Read) error {
	if read == broker.Cached {
		err := s.cache.Get(ctx, key, obj, client.UnsafeDisableDeepCopy)
		if !apierrors.IsNotFound(err) {
			return err
		}
		// Not in the cache: perhaps just created. Ask the API server.
	}
	return s.client.Get(ctx, key, obj)
}

// Create implements broker.Store: it creates the object's namespace when
// missing (labelled as the broker's, so that it goes with the instance),
// then the object.
func (s *Store) Create(ctx context.Context, obj client.Object) error {
	if err := s.ensureNamespace(ctx, obj); err != nil {
		return err
	}
	return s.client.Create(ctx, obj)
}

func (s *Store) ensureNamespace(ctx context.Context, obj client.Object) error {
	ns := &corev1.Namespace{}
	err := s.client.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, ns)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	inst, ok := obj.(*osbv1alpha1.SFServiceInstance)
	if !ok {
		// A binding's namespace is its instance's; it exists.
		return nil
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        obj.GetNamespace(),
		Labels:      map[string]string{broker.LabelManagedBy: broker.ManagedByBroker},
		Annotations: map[string]string{broker.AnnotationInstanceID: inst.Spec.InstanceID},
	}}
	if err := s.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns.Name, err)
	}
	return nil
}

// Update implements broker.Store.
func (s *Store) Update(ctx context.Context, obj client.Object) error {
	return s.client.Update(ctx, obj)
}

// UpdateStatus implements broker.Store.
func (s *Store) UpdateStatus(ctx context.Context, obj client.Object) error {
	return s.client.Status().Update(ctx, obj)
}

// Delete implements broker.Store. The UID precondition makes sure a
// re-created object of the same name is not deleted in its place.
func (s *Store) Delete(ctx context.Context, obj client.Object) error {
	uid := obj.GetUID()
	opts := []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}
	if uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	return s.client.Delete(ctx, obj, opts...)
}

// List implements broker.Store.
func (s *Store) List(ctx context.Context, namespace string, list client.ObjectList) error {
	return s.client.List(ctx, list, client.InNamespace(namespace))
}

// BindResponse implements broker.Store. The Secret is read from the API
// server each time and never cached or logged.
func (s *Store) BindResponse(ctx context.Context, namespace, secretName string) ([]byte, error) {
	sec := &corev1.Secret{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secretName}, sec); err != nil {
		return nil, err
	}
	data, ok := sec.Data[osbv1alpha1.BindingSecretResponseKey]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), secretName+"/"+osbv1alpha1.BindingSecretResponseKey)
	}
	return data, nil
}
