package sf

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Read says how current a Store read must be.
type Read int

const (
	// Cached lets a cache answer. The object may lag behind the latest
	// writes, and it may be shared with the cache: the caller must not
	// modify it.
	Cached Read = iota
	// Fresh reads the latest stored version into a private copy.
	Fresh
	// CacheOnly reads the cache alone, as Cached but without a fallback:
	// NotFound may mean that the cache has not seen the object yet. It is
	// for reads that a later write or read checks anyway (a create that
	// fails with AlreadyExists is decided again on a fresh read) and for
	// waits that a change notification ends.
	CacheOnly
)

// Store keeps the SFServiceInstances and SFServiceBindings the broker
// records. Errors are Kubernetes API errors (k8s.io/apimachinery
// api/errors): NotFound, AlreadyExists, Conflict and Invalid mean what they
// mean there.
type Store interface {
	// Get reads the object stored at key into obj (an *SFServiceInstance
	// or *SFServiceBinding). A Cached read is never older than what this
	// Store last wrote or read fresh of the object (read-your-writes);
	// a CacheOnly read may be.
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, read Read) error
	// Create stores a new object. For an instance it creates the
	// instance's namespace first when it does not exist; when it exists and
	// is not the broker's for this instance (OwnsNamespace) it writes
	// nothing and returns NamespaceNotOwned. obj is updated with the
	// stored version.
	Create(ctx context.Context, obj client.Object) error
	// Update writes obj's metadata and spec. obj's resourceVersion must be
	// the stored one (Conflict otherwise); obj is updated with the stored
	// version.
	Update(ctx context.Context, obj client.Object) error
	// UpdateStatus writes obj's status, with the same precondition.
	UpdateStatus(ctx context.Context, obj client.Object) error
	// Delete starts the deletion of obj: of the stored object with obj's
	// UID and, when obj has one, its resourceVersion (Conflict
	// otherwise). A Cached read that follows is never older than the
	// deletion (read-your-writes).
	Delete(ctx context.Context, obj client.Object) error
	// List reads the objects of a namespace into list, as Get reads one:
	// a Cached list holds no version older than this Store wrote or read
	// fresh. The items are the caller's to modify.
	List(ctx context.Context, namespace string, list client.ObjectList, read Read) error
	// Namespace reads the namespace called name. The broker's own
	// namespaces may come from a cache: it never changes their labels and
	// annotations after creating them. Any other namespace, or one the
	// cache has not seen yet, is read from the API server. The object may
	// be shared with the cache: the caller must not modify it.
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
	// BindResponse returns the value of the "response" key of the Secret
	// that holds a binding's OSB bind response. The value holds
	// credentials: it must never be logged.
	BindResponse(ctx context.Context, namespace, secretName string) ([]byte, error)
}

// Notifier is implemented by a Store whose reads come from a cache that is
// kept current by a watch: it tells a waiting request when the object it
// waits for changed, so that the request reads it again at once rather
// than polling.
type Notifier interface {
	// Notify returns a channel that is closed at the next change the cache
	// sees of the object at key (of obj's kind; obj is not read), and a
	// function that stops the notification (it must be called). A change
	// that happened before Notify is not reported: read after Notify.
	Notify(key client.ObjectKey, obj client.Object) (<-chan struct{}, func())
}
