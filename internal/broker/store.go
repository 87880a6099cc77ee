package broker

import (
	"context"

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
)

// Store keeps the SFServiceInstances and SFServiceBindings the broker
// records. Errors are Kubernetes API errors (k8s.io/apimachinery
// api/errors): NotFound, AlreadyExists, Conflict and Invalid mean what they
// mean there.
type Store interface {
	// Get reads the object stored at key into obj (an *SFServiceInstance
	// or *SFServiceBinding).
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, read Read) error
	// Create stores a new object, creating its namespace first when it
	// does not exist. obj is updated with the stored version.
	Create(ctx context.Context, obj client.Object) error
	// Update writes obj's metadata and spec. obj's resourceVersion must be
	// the stored one (Conflict otherwise); obj is updated with the stored
	// version.
	Update(ctx context.Context, obj client.Object) error
	// UpdateStatus writes obj's status, with the same precondition.
	UpdateStatus(ctx context.Context, obj client.Object) error
	// Delete starts the deletion of obj (of the stored object with obj's
	// UID).
	Delete(ctx context.Context, obj client.Object) error
	// List reads the objects of a namespace into list, fresh.
	List(ctx context.Context, namespace string, list client.ObjectList) error
	// BindResponse returns the value of the "response" key of the Secret
	// that holds a binding's OSB bind response. The value holds
	// credentials: it must never be logged.
	BindResponse(ctx context.Context, namespace, secretName string) ([]byte, error)
}
