package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// fakeStore is an in-memory sf.Store with the API server's semantics that the
// broker relies on: resourceVersion preconditions, status written only
// through UpdateStatus, generation bumped on spec changes and on deletion,
// finalizers holding deleted objects. With instant set it also plays an
// instant provisioner: every operation succeeds as soon as it is written.
type fakeStore struct {
	mu      sync.Mutex
	objects map[string]client.Object
	rv      int64
	instant bool
	// response is the bind response returned for every binding.
	response []byte
	// lag makes cached reads return each object as it was before its
	// latest write, like an informer cache that has not seen the write.
	lag  bool
	prev map[string]client.Object
	// onDelete, when set, runs on the stored object (under the store's
	// lock) when its deletion starts: a provisioner that reacts at once.
	onDelete func(stored client.Object)
	// namespaces are the instances' namespaces, created as kubestore
	// creates them.
	namespaces map[string]*corev1.Namespace
}

var _ sf.Store = &fakeStore{}

func newFakeStore(instant bool) *fakeStore {
	return &fakeStore{objects: map[string]client.Object{}, prev: map[string]client.Object{}, namespaces: map[string]*corev1.Namespace{}, instant: instant, response: []byte(`{"credentials":{"user":"u","password":"p"}}`)}
}

func storeKey(obj client.Object, key client.ObjectKey) string {
	return fmt.Sprintf("%T/%s/%s", obj, key.Namespace, key.Name)
}

func resourceOf(obj client.Object) schema.GroupResource {
	if _, ok := obj.(*osbv1alpha1.SFServiceBinding); ok {
		return bindingResource
	}
	return instanceResource
}

func copyInto(dst, src client.Object) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
}

func (f *fakeStore) Get(_ context.Context, key client.ObjectKey, obj client.Object, read sf.Read) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	stored, ok := f.objects[storeKey(obj, key)]
	if !ok {
		return apierrors.NewNotFound(resourceOf(obj), key.Name)
	}
	if p, ok := f.prev[storeKey(obj, key)]; ok && f.lag && read != sf.Fresh {
		stored = p
	}
	copyInto(obj, stored)
	return nil
}

func (f *fakeStore) nextRV() string {
	f.rv++
	return strconv.FormatInt(f.rv, 10)
}

func (f *fakeStore) Create(_ context.Context, obj client.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := storeKey(obj, client.ObjectKeyFromObject(obj))
	if _, ok := f.objects[k]; ok {
		return apierrors.NewAlreadyExists(resourceOf(obj), obj.GetName())
	}
	if err := checkJSON(obj); err != nil {
		return err
	}
	if inst, ok := obj.(*osbv1alpha1.SFServiceInstance); ok {
		ns, exists := f.namespaces[inst.Namespace]
		if exists && !sf.OwnsNamespace(ns, inst.Spec.InstanceID) {
			return sf.NamespaceNotOwned(inst.Namespace)
		}
		if !exists {
			f.namespaces[inst.Namespace] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:        inst.Namespace,
				Labels:      map[string]string{sf.LabelManagedBy: sf.ManagedByBroker},
				Annotations: map[string]string{sf.AnnotationInstanceID: inst.Spec.InstanceID},
			}}
		}
	}
	obj.SetUID(types.UID("uid-" + f.nextRV()))
	obj.SetResourceVersion(f.nextRV())
	obj.SetGeneration(1)
	obj.SetCreationTimestamp(metav1.Now())
	clearStatus(obj)
	stored := obj.DeepCopyObject().(client.Object)
	f.objects[k] = stored
	f.provision(stored)
	copyInto(obj, stored)
	return nil
}

func (f *fakeStore) Update(_ context.Context, obj client.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := storeKey(obj, client.ObjectKeyFromObject(obj))
	stored, ok := f.objects[k]
	if !ok {
		return apierrors.NewNotFound(resourceOf(obj), obj.GetName())
	}
	if stored.GetResourceVersion() != obj.GetResourceVersion() {
		return apierrors.NewConflict(resourceOf(obj), obj.GetName(), fmt.Errorf("resourceVersion changed"))
	}
	if err := checkJSON(obj); err != nil {
		return err
	}
	f.prev[k] = stored.DeepCopyObject().(client.Object)
	next := obj.DeepCopyObject().(client.Object)
	copyStatus(next, stored)
	next.SetDeletionTimestamp(stored.GetDeletionTimestamp())
	next.SetGeneration(stored.GetGeneration())
	if !reflect.DeepEqual(specOf(next), specOf(stored)) {
		next.SetGeneration(stored.GetGeneration() + 1)
	}
	next.SetResourceVersion(f.nextRV())
	if next.GetDeletionTimestamp() != nil && len(next.GetFinalizers()) == 0 {
		delete(f.objects, k)
		copyInto(obj, next)
		return nil
	}
	f.objects[k] = next
	f.provision(next)
	copyInto(obj, next)
	return nil
}

func (f *fakeStore) UpdateStatus(_ context.Context, obj client.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := storeKey(obj, client.ObjectKeyFromObject(obj))
	stored, ok := f.objects[k]
	if !ok {
		return apierrors.NewNotFound(resourceOf(obj), obj.GetName())
	}
	if stored.GetResourceVersion() != obj.GetResourceVersion() {
		return apierrors.NewConflict(resourceOf(obj), obj.GetName(), fmt.Errorf("resourceVersion changed"))
	}
	f.prev[k] = stored.DeepCopyObject().(client.Object)
	copyStatus(stored, obj)
	stored.SetResourceVersion(f.nextRV())
	f.provision(stored)
	copyInto(obj, stored)
	return nil
}

func (f *fakeStore) Delete(_ context.Context, obj client.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := storeKey(obj, client.ObjectKeyFromObject(obj))
	stored, ok := f.objects[k]
	if !ok || (obj.GetUID() != "" && stored.GetUID() != obj.GetUID()) {
		return apierrors.NewNotFound(resourceOf(obj), obj.GetName())
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != stored.GetResourceVersion() {
		return apierrors.NewConflict(resourceOf(obj), obj.GetName(), fmt.Errorf("resourceVersion changed"))
	}
	if len(stored.GetFinalizers()) == 0 {
		delete(f.objects, k)
		return nil
	}
	if stored.GetDeletionTimestamp() == nil {
		now := metav1.Now()
		stored.SetDeletionTimestamp(&now)
		stored.SetGeneration(stored.GetGeneration() + 1)
		stored.SetResourceVersion(f.nextRV())
		if f.onDelete != nil {
			f.onDelete(stored)
			stored.SetResourceVersion(f.nextRV())
		}
		if f.instant {
			// The instant provisioner finishes the deletion at once:
			// it releases its finalizer, which the broker puts on
			// bindings.
			stored.SetFinalizers(slices.DeleteFunc(stored.GetFinalizers(), func(s string) bool { return s == osbv1alpha1.FinalizerProvisioner }))
		}
	}
	f.provision(stored)
	return nil
}

func (f *fakeStore) List(_ context.Context, namespace string, list client.ObjectList, _ sf.Read) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	bl, ok := list.(*osbv1alpha1.SFServiceBindingList)
	if !ok {
		return fmt.Errorf("fake store lists bindings only, not %T", list)
	}
	bl.Items = nil
	for _, o := range f.objects {
		if b, ok := o.(*osbv1alpha1.SFServiceBinding); ok && b.Namespace == namespace {
			bl.Items = append(bl.Items, *b.DeepCopy())
		}
	}
	return nil
}

func (f *fakeStore) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ns, ok := f.namespaces[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	return ns.DeepCopy(), nil
}

func (f *fakeStore) BindResponse(_ context.Context, _, _ string) ([]byte, error) {
	return f.response, nil
}

// provision plays the instant provisioner on a stored object.
func (f *fakeStore) provision(obj client.Object) {
	if !f.instant || obj.GetDeletionTimestamp() != nil {
		return
	}
	switch o := obj.(type) {
	case *osbv1alpha1.SFServiceInstance:
		if !o.Status.State.IsTerminal() || o.Status.ObservedGeneration < o.Generation {
			o.Status.State = osbv1alpha1.StateSucceeded
			o.Status.ObservedGeneration = o.Generation
		}
	case *osbv1alpha1.SFServiceBinding:
		if !o.Status.State.IsTerminal() || o.Status.ObservedGeneration < o.Generation {
			o.Status.State = osbv1alpha1.StateSucceeded
			o.Status.Response = &osbv1alpha1.BindingResponse{SecretRef: "sf-" + o.Name}
			o.Status.ObservedGeneration = o.Generation
		}
	}
}

func specOf(obj client.Object) any {
	switch o := obj.(type) {
	case *osbv1alpha1.SFServiceInstance:
		return o.Spec
	case *osbv1alpha1.SFServiceBinding:
		return o.Spec
	}
	return nil
}

func clearStatus(obj client.Object) {
	switch o := obj.(type) {
	case *osbv1alpha1.SFServiceInstance:
		o.Status = osbv1alpha1.SFServiceInstanceStatus{}
	case *osbv1alpha1.SFServiceBinding:
		o.Status = osbv1alpha1.SFServiceBindingStatus{}
	}
}

func copyStatus(dst, src client.Object) {
	switch d := dst.(type) {
	case *osbv1alpha1.SFServiceInstance:
		d.Status = *src.(*osbv1alpha1.SFServiceInstance).Status.DeepCopy()
	case *osbv1alpha1.SFServiceBinding:
		d.Status = *src.(*osbv1alpha1.SFServiceBinding).Status.DeepCopy()
	}
}

// checkJSON refuses what an API server refuses for free-form fields: JSON
// it cannot decode (for example a number out of range).
func checkJSON(obj client.Object) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

// The resources of the objects the fake store keeps, for its errors.
var (
	instanceResource = osbv1alpha1.GroupVersion.WithResource("sfserviceinstances").GroupResource()
	bindingResource  = osbv1alpha1.GroupVersion.WithResource("sfservicebindings").GroupResource()
)
