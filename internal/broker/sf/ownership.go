package sf

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/osb"
)

// The broker keeps every instance and its bindings in a namespace of their
// own, sf-<name>, which it creates with LabelManagedBy and
// AnnotationInstanceID. Tenants cannot create namespaces, but a platform
// may name a tenant's namespace sf-<something>; whatever lives there was
// written by that tenant. So the broker reads, serves and changes objects
// only in a namespace it made for that very instance, and a provision whose
// namespace exists and is someone else's is refused (409) without touching
// it.

// OwnsNamespace reports whether ns is the namespace the broker created for
// the instance instanceID: labelled as the broker's and annotated with that
// id. Only writers of namespaces (the broker, platform operators) can set
// both.
func OwnsNamespace(ns *corev1.Namespace, instanceID string) bool {
	return ns != nil && ns.Labels[LabelManagedBy] == ManagedByBroker && ns.Annotations[AnnotationInstanceID] == instanceID
}

// NamespaceNotOwned is the answer to a provision whose namespace exists but
// was not created by the broker for this instance: a 409 whose description
// names the namespace (it follows from the id, which the platform sent).
func NamespaceNotOwned(namespace string) error {
	return osb.Conflict("The namespace %s of this instance exists and the broker did not create it for this instance; the broker neither uses nor changes it. Choose another instance id.", namespace)
}

// checkNamespace returns nil when the namespace of instanceID is the one the
// broker created for it, and NotFound otherwise: an instance or binding
// found in a namespace the broker does not own is no instance or binding of
// the broker.
func checkNamespace(ctx context.Context, store Store, instanceID string) error {
	name := InstanceNamespace(instanceID)
	ns, err := store.Namespace(ctx, name)
	if err != nil {
		return err
	}
	if !OwnsNamespace(ns, instanceID) {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	return nil
}

// OwnedInstance reads the instance of id: NotFound when there is none,
// when the object under its name records another id (a hash collision), or
// when its namespace is not the broker's for this id.
func OwnedInstance(ctx context.Context, store Store, id string, read Read) (*osbv1alpha1.SFServiceInstance, error) {
	key := InstanceKey(id)
	inst := &osbv1alpha1.SFServiceInstance{}
	if err := store.Get(ctx, key, inst, read); err != nil {
		return nil, err
	}
	if inst.Spec.InstanceID != id {
		return nil, apierrors.NewNotFound(instanceResource, key.Name)
	}
	if err := checkNamespace(ctx, store, id); err != nil {
		return nil, err
	}
	return inst, nil
}
