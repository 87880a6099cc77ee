package kubestore

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/notify"
)

// Store keeps instances and bindings as SFServiceInstances and
// SFServiceBindings on the onboarding cluster. Cached reads come from an
// informer cache of both kinds (managed fields stripped), falling back to
// the API server for objects the cache does not hold yet and for objects
// the cache holds in a version older than the Store last wrote or read
// fresh (read-your-writes) once the cache did not catch up within
// CacheCatchUp; fresh reads, writes and Secret reads go to the API server.
// The informers' events wake the requests waiting for an object
// (sf.Notifier).
type Store struct {
	cache  cache.Cache
	client client.Client

	// waiters are woken by an event of their object.
	waiters notify.Waiters[objectRef]

	mu sync.Mutex
	// known is the latest version of an object this Store wrote or read
	// fresh, for the objects the cache has not caught up with yet; an
	// event that brings the cache there removes it.
	known map[objectRef]version
	// created holds the namespaces this Store created that the cache has
	// not seen yet (read-your-writes for Namespace): the first poll after
	// a provision needs no API request for them. An event of the
	// namespace removes it.
	created map[string]*corev1.Namespace
}

// version is what the cache must hold of an object to be current: the
// resourceVersion rv or a later one, or, after a deletion (after), a
// version later than rv, the one deleted from, or none at all.
type version struct {
	rv    string
	after bool
}

// reachedBy reports whether a cached version rv is current.
func (v version) reachedBy(rv string) bool {
	if v.after {
		return later(rv, v.rv)
	}
	return atLeast(rv, v.rv)
}

// objectRef names an instance or a binding: the kinds may share a key.
type objectRef struct {
	binding bool
	key     client.ObjectKey
}

func refOf(key client.ObjectKey, obj client.Object) objectRef {
	_, binding := obj.(*osbv1alpha1.SFServiceBinding)
	return objectRef{binding: binding, key: key}
}

var (
	_ sf.Store    = &Store{}
	_ sf.Notifier = &Store{}
)

// CacheOptions returns the options of the cache a Store reads from: every
// namespace, SFServiceInstances and SFServiceBindings without managed
// fields, and the Namespaces labelled as the broker's (their labels and
// annotations say which instance each was created for; the broker never
// changes them). Secrets are never cached.
func CacheOptions(opts cache.Options) cache.Options {
	opts.DefaultTransform = cache.TransformStripManagedFields()
	byObject := map[client.Object]cache.ByObject{}
	for o, b := range opts.ByObject {
		byObject[o] = b
	}
	byObject[&corev1.Namespace{}] = cache.ByObject{
		Label: labels.SelectorFromSet(labels.Set{sf.LabelManagedBy: sf.ManagedByBroker}),
	}
	opts.ByObject = byObject
	return opts
}

// New returns a Store reading through c (an informer cache the caller
// starts) and writing through cl (a client without cache).
func New(c cache.Cache, cl client.Client) *Store {
	return &Store{cache: c, client: cl, known: map[objectRef]version{}, created: map[string]*corev1.Namespace{}}
}

// Informers registers the informers the Store reads from, so that they sync
// before the broker serves, and the event handlers that wake waiting
// requests. Call it before starting the cache's sync wait.
func (s *Store) Informers(ctx context.Context) error {
	nsInformer, err := s.cache.GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		return fmt.Errorf("informer for namespaces: %w", err)
	}
	seen := func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if ns, ok := o.(client.Object); ok {
			s.mu.Lock()
			delete(s.created, ns.GetName())
			s.mu.Unlock()
		}
	}
	if _, err := nsInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, o any) { seen(o) },
		DeleteFunc: seen,
	}); err != nil {
		return fmt.Errorf("event handler for namespaces: %w", err)
	}
	for _, obj := range []client.Object{&osbv1alpha1.SFServiceInstance{}, &osbv1alpha1.SFServiceBinding{}} {
		inf, err := s.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
		_, binding := obj.(*osbv1alpha1.SFServiceBinding)
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.changed(binding, o, false) },
			UpdateFunc: func(_, o any) { s.changed(binding, o, false) },
			DeleteFunc: func(o any) { s.changed(binding, o, true) },
		}); err != nil {
			return fmt.Errorf("event handler for %T: %w", obj, err)
		}
	}
	return nil
}

// changed handles an informer event: the cache now holds o (or no longer
// holds it, when deleted). It wakes the object's waiters and forgets a
// known version the cache has reached. The informer calls it after it has
// updated the cache, so that a woken request reads the new version.
func (s *Store) changed(binding bool, o any, deleted bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	ref := objectRef{binding: binding, key: client.ObjectKeyFromObject(obj)}
	s.mu.Lock()
	if v, ok := s.known[ref]; ok && (deleted || v.reachedBy(obj.GetResourceVersion())) {
		delete(s.known, ref)
	}
	s.mu.Unlock()
	s.waiters.Wake(ref)
}

// atLeast reports whether resourceVersion a is b or later. Versions that
// cannot be compared count as older, so that a read goes to the API server.
func atLeast(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c >= 0
}

// later reports whether resourceVersion a is after b, with atLeast's
// rule for versions that cannot be compared.
func later(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}

// Notify implements sf.Notifier.
func (s *Store) Notify(key client.ObjectKey, obj client.Object) (<-chan struct{}, func()) {
	return s.waiters.Notify(refOf(key, obj))
}

// note records rv as the latest version of the object this Store knows,
// unless the cache already holds it or a later one: then no event would
// come to forget it again.
func (s *Store) note(ctx context.Context, ref objectRef, rv string) {
	s.remember(ctx, ref, version{rv: rv})
}

// remember records v as what the cache must hold of the object at ref,
// unless the cache holds it already or a later version is recorded. The
// cache is read under the lock that the event handler takes after the
// cache changed, so that no event slips between the check and the record.
func (s *Store) remember(ctx context.Context, ref objectRef, v version) {
	if v.rv == "" {
		return
	}
	var cached client.Object = &osbv1alpha1.SFServiceInstance{}
	if ref.binding {
		cached = &osbv1alpha1.SFServiceBinding{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.cache.Get(ctx, ref.key, cached, client.UnsafeDisableDeepCopy)
	switch {
	case err == nil && v.reachedBy(cached.GetResourceVersion()):
		return
	case err != nil && v.after:
		// A deletion of an object the cache does not hold (any more): no
		// event would forget it, and a read that misses the cache asks
		// the API server anyway.
		return
	}
	if old, ok := s.known[ref]; ok && (later(old.rv, v.rv) || old.rv == v.rv && (old.after || !v.after)) {
		return
	}
	s.known[ref] = v
}

// current reports whether a cached version rv of the object is at least
// the latest this Store knows of.
func (s *Store) current(ref objectRef, rv string) bool {
	s.mu.Lock()
	known, ok := s.known[ref]
	s.mu.Unlock()
	return !ok || known.reachedBy(rv)
}

// Get implements sf.Store.
func (s *Store) Get(ctx context.Context, key client.ObjectKey, obj client.Object, read sf.Read) error {
	ref := refOf(key, obj)
	switch read {
	case sf.CacheOnly:
		return s.cache.Get(ctx, key, obj, client.UnsafeDisableDeepCopy)
	case sf.Cached:
		err := s.cache.Get(ctx, key, obj, client.UnsafeDisableDeepCopy)
		if (err == nil || apierrors.IsNotFound(err)) && !s.current(ref, obj.GetResourceVersion()) && s.awaitCache(ctx, ref) {
			// The cache lagged behind this Store's own write and caught
			// up: it answers, not the API server.
			resetObject(obj)
			err = s.cache.Get(ctx, key, obj, client.UnsafeDisableDeepCopy)
		}
		switch {
		case err == nil && s.current(ref, obj.GetResourceVersion()):
			return nil
		case err == nil:
			// The cache lags behind this Store's own write: read the
			// stored version, into a copy of obj's own, since obj now
			// shares maps and slices with the cache.
			resetObject(obj)
		case !apierrors.IsNotFound(err):
			return err
		}
		// Not in the cache: perhaps just created. Ask the API server.
	}
	if err := s.client.Get(ctx, key, obj); err != nil {
		return err
	}
	s.note(ctx, ref, obj.GetResourceVersion())
	return nil
}

// CacheCatchUp bounds how long a Cached read waits for the cache to catch
// up with this Store's own write of the object before it reads the API
// server instead. The informer brings a write within milliseconds on a
// healthy cluster (a platform polls last_operation right after the 202
// that answered the write); the bound keeps a stalled watch from holding
// a request long.
const CacheCatchUp = time.Second

// awaitCache waits, for up to CacheCatchUp, until the cache holds the
// latest version of the object at ref that this Store wrote or read fresh,
// and reports whether it does. Get calls it only for an object it knows a
// version of: for any other the cache has nothing of ours to catch up
// with, and only the API server can tell whether the object exists.
func (s *Store) awaitCache(ctx context.Context, ref objectRef) bool {
	return s.waiters.Await(ctx, ref, CacheCatchUp, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, lagging := s.known[ref]
		return !lagging
	})
}

// resetObject clears obj, an SFServiceInstance or SFServiceBinding that a
// cache read filled with references into the cache.
func resetObject(obj client.Object) {
	switch o := obj.(type) {
	case *osbv1alpha1.SFServiceInstance:
		*o = osbv1alpha1.SFServiceInstance{}
	case *osbv1alpha1.SFServiceBinding:
		*o = osbv1alpha1.SFServiceBinding{}
	}
}

// Create implements sf.Store: for an instance it creates the
// instance's namespace when missing (labelled as the broker's, so that it
// goes with the instance) and checks that an existing one is the broker's
// for this instance, then it creates the object.
func (s *Store) Create(ctx context.Context, obj client.Object) error {
	if err := s.ensureNamespace(ctx, obj); err != nil {
		return err
	}
	if err := s.client.Create(ctx, obj); err != nil {
		return err
	}
	s.note(ctx, refOf(client.ObjectKeyFromObject(obj), obj), obj.GetResourceVersion())
	return nil
}

// ensureNamespace creates an instance's namespace unless it exists. It
// creates without reading first: one round trip either way, and the
// namespace of a new instance never exists. A namespace that exists must
// be the one the broker created for this instance; any other (a tenant's
// namespace that happens to be called sf-<id>) is refused with
// sf.NamespaceNotOwned and left as it is. A binding's namespace is its
// instance's, which the broker checked when it read the instance.
func (s *Store) ensureNamespace(ctx context.Context, obj client.Object) error {
	inst, ok := obj.(*osbv1alpha1.SFServiceInstance)
	if !ok {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        obj.GetNamespace(),
		Labels:      map[string]string{sf.LabelManagedBy: sf.ManagedByBroker},
		Annotations: map[string]string{sf.AnnotationInstanceID: inst.Spec.InstanceID},
	}}
	err := s.client.Create(ctx, ns)
	switch {
	case err == nil:
		s.noteNamespace(ctx, ns)
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("create namespace %s: %w", ns.Name, err)
	}
	existing, err := s.Namespace(ctx, ns.Name)
	if err != nil {
		return fmt.Errorf("read namespace %s: %w", ns.Name, err)
	}
	if !sf.OwnsNamespace(existing, inst.Spec.InstanceID) {
		return sf.NamespaceNotOwned(ns.Name)
	}
	return nil
}

// noteNamespace records ns, which this Store just created, unless the
// cache already holds it: then no event would come to forget it. The cache
// is read under the lock the event handler takes after the cache changed,
// as in note.
func (s *Store) noteNamespace(ctx context.Context, ns *corev1.Namespace) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cache.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}, client.UnsafeDisableDeepCopy); err == nil {
		return
	}
	s.created[ns.Name] = ns
}

// Namespace implements sf.Store: from the cache, which holds only the
// namespaces labelled as the broker's; a namespace this Store created that
// the cache has not seen yet as created; any other from the API server
// (one that is not the broker's).
func (s *Store) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	err := s.cache.Get(ctx, client.ObjectKey{Name: name}, ns, client.UnsafeDisableDeepCopy)
	switch {
	case err == nil:
		return ns, nil
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	s.mu.Lock()
	created := s.created[name]
	s.mu.Unlock()
	if created != nil {
		return created, nil
	}
	ns = &corev1.Namespace{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, err
	}
	return ns, nil
}

// Update implements sf.Store.
func (s *Store) Update(ctx context.Context, obj client.Object) error {
	if err := s.client.Update(ctx, obj); err != nil {
		return err
	}
	s.note(ctx, refOf(client.ObjectKeyFromObject(obj), obj), obj.GetResourceVersion())
	return nil
}

// UpdateStatus implements sf.Store.
func (s *Store) UpdateStatus(ctx context.Context, obj client.Object) error {
	if err := s.client.Status().Update(ctx, obj); err != nil {
		return err
	}
	s.note(ctx, refOf(client.ObjectKeyFromObject(obj), obj), obj.GetResourceVersion())
	return nil
}

// Delete implements sf.Store. The UID precondition makes sure a
// re-created object of the same name is not deleted in its place; the
// resourceVersion one, that the object is still the version the caller
// decided on. The deletion is remembered, so that a Cached read waits for
// the cache to see it.
func (s *Store) Delete(ctx context.Context, obj client.Object) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	pre := client.Preconditions{}
	if uid != "" {
		pre.UID = &uid
	}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	if err := s.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground), pre); err != nil {
		return err
	}
	s.remember(ctx, refOf(client.ObjectKeyFromObject(obj), obj), version{rv: rv, after: true})
	return nil
}

// List implements sf.Store. A Cached list first waits, for up to
// CacheCatchUp each, for the cache to catch up with the objects of the
// namespace this Store wrote or read fresh, and lists from the API server
// when it does not.
func (s *Store) List(ctx context.Context, namespace string, list client.ObjectList, read sf.Read) error {
	if read != sf.Fresh {
		_, binding := list.(*osbv1alpha1.SFServiceBindingList)
		caught := true
		for _, ref := range s.lagging(namespace, binding) {
			if !s.awaitCache(ctx, ref) {
				caught = false
				break
			}
		}
		if caught || read == sf.CacheOnly {
			return s.cache.List(ctx, list, client.InNamespace(namespace))
		}
	}
	return s.client.List(ctx, list, client.InNamespace(namespace))
}

// lagging returns the objects of a kind in namespace that the cache has
// not caught up with.
func (s *Store) lagging(namespace string, binding bool) []objectRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	var refs []objectRef
	for ref := range s.known {
		if ref.binding == binding && ref.key.Namespace == namespace {
			refs = append(refs, ref)
		}
	}
	return refs
}

// BindResponse implements sf.Store. The Secret is read from the API
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
