package spruntime

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// SetupWithManager registers the reconciler with mgr, the manager of the
// onboarding cluster (where the API objects live; its scheme must hold T and
// its list type). The caller must have added the platform cluster given to
// NewAPIReconciler to mgr (mgr.Add(platform)), so that its cache, which the
// ProviderConfig, Secret and ConfigMap watches use, runs with the manager.
//
// It watches:
//   - the API objects, for changes of generation, labels or annotations and
//     for the start of deletion (not for status changes, so that the
//     runtime's own status writes do not trigger reconciles);
//   - the ProviderConfig named like the provider on the platform cluster:
//     any change enqueues every API object;
//   - with WithSecretWatch / WithConfigMapWatch, the Secrets / ConfigMaps
//     of a namespace on the platform cluster: a change of one the
//     ProviderConfig references enqueues every API object.
func (r *APIReconciler[T, C]) SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil {
		return fmt.Errorf("setup %s reconciler: no manager", r.providerName)
	}
	scheme := mgr.GetScheme()
	gvk, err := apiutil.GVKForObject(r.newObj(), scheme)
	if err != nil {
		return fmt.Errorf("setup reconciler: API type %T is not in the manager's scheme: %w", r.newObj(), err)
	}
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if !scheme.Recognizes(listGVK) {
		return fmt.Errorf("setup reconciler: the manager's scheme has no %s", listGVK)
	}
	if _, err := apiutil.GVKForObject(r.newConfig(), r.platform.GetScheme()); err != nil {
		return fmt.Errorf("setup reconciler: ProviderConfig type %T is not in the platform cluster's scheme: %w", r.newConfig(), err)
	}
	r.client, r.scheme, r.kind, r.listGVK = mgr.GetClient(), scheme, gvk.Kind, listGVK
	initMetrics(r.kind)
	r.finalizer = FinalizerName(gvk.Group)
	name := r.opts.controllerName
	if name == "" {
		name = strings.ToLower(gvk.Kind)
	}
	r.recorder = r.opts.recorder
	if r.recorder == nil {
		r.recorder = mgr.GetEventRecorder(name)
	}
	copts := r.opts.controllerOptions
	if rl := r.opts.backoff.rateLimiter(); rl != nil {
		copts.RateLimiter = rl
	}

	b := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(copts).
		For(r.newObj(), builder.WithPredicates(changed[client.Object]())).
		WatchesRawSource(source.Kind(r.platform.GetCache(), r.newConfig(),
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ C) []reconcile.Request {
				r.configEpoch.Add(1)
				return r.enqueueAll(ctx)
			}),
			predicate.NewTypedPredicateFuncs(func(c C) bool { return c.GetName() == r.providerName }),
			changed[C]()))
	if w := r.opts.secretWatch; w != nil {
		b = b.WatchesRawSource(source.Kind(r.platform.GetCache(), &corev1.Secret{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, s *corev1.Secret) []reconcile.Request {
				return r.enqueueIfReferenced(ctx, func(cfg Config) bool { return w.referenced(cfg, s) })
			}),
			inNamespace[*corev1.Secret](w.namespace)))
	}
	if w := r.opts.configMapWatch; w != nil {
		b = b.WatchesRawSource(source.Kind(r.platform.GetCache(), &corev1.ConfigMap{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, cm *corev1.ConfigMap) []reconcile.Request {
				return r.enqueueIfReferenced(ctx, func(cfg Config) bool { return w.referenced(cfg, cm) })
			}),
			inNamespace[*corev1.ConfigMap](w.namespace)))
	}
	if r.opts.mcpWatch {
		// A service object is named like its ManagedControlPlane: when
		// the MCP appears or changes, the object may proceed.
		mcp := &metav1.PartialObjectMetadata{}
		mcp.SetGroupVersionKind(corev2alpha1.GroupVersion.WithKind("ManagedControlPlane"))
		b = b.WatchesMetadata(mcp, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		}))
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("setup %s controller: %w", name, err)
	}
	return nil
}

// enqueueAll returns a request for every API object. Objects of other
// environments are included; Reconcile skips them.
func (r *APIReconciler[T, C]) enqueueAll(ctx context.Context) []reconcile.Request {
	log := logf.FromContext(ctx)
	obj, err := r.scheme.New(r.listGVK)
	if err != nil {
		log.Error(err, "Cannot create a list of the API objects", "kind", r.listGVK.Kind)
		return nil
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		log.Error(fmt.Errorf("%T is not a client.ObjectList", obj), "Cannot list the API objects")
		return nil
	}
	if err := r.client.List(ctx, list); err != nil {
		log.Error(err, "Cannot list the API objects to reconcile them after a ProviderConfig change", "kind", r.kind)
		return nil
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		log.Error(err, "Cannot read the list of API objects", "kind", r.kind)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(items))
	for _, item := range items {
		m, err := apimeta.Accessor(item)
		if err != nil {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
	}
	return reqs
}

// enqueueIfReferenced enqueues every API object when the current
// ProviderConfig exists and referenced says that it references the object
// that changed.
func (r *APIReconciler[T, C]) enqueueIfReferenced(ctx context.Context, referenced func(Config) bool) []reconcile.Request {
	cfg := r.newConfig()
	if err := r.platform.GetClient().Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		return nil
	}
	if !referenced(cfg) {
		return nil
	}
	r.configEpoch.Add(1)
	return r.enqueueAll(ctx)
}

// changed passes creations, deletions and updates that change the
// generation, labels or annotations or start the deletion; it drops
// status-only updates.
func changed[O client.Object]() predicate.TypedPredicate[O] {
	return predicate.Or[O](
		predicate.TypedGenerationChangedPredicate[O]{},
		predicate.TypedLabelChangedPredicate[O]{},
		predicate.TypedAnnotationChangedPredicate[O]{},
		predicate.TypedFuncs[O]{
			CreateFunc:  func(event.TypedCreateEvent[O]) bool { return false },
			DeleteFunc:  func(event.TypedDeleteEvent[O]) bool { return false },
			GenericFunc: func(event.TypedGenericEvent[O]) bool { return false },
			UpdateFunc: func(e event.TypedUpdateEvent[O]) bool {
				return !isNil(e.ObjectOld) && !isNil(e.ObjectNew) &&
					e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
			},
		},
	)
}

// inNamespace passes objects of one namespace.
func inNamespace[O client.Object](ns string) predicate.TypedPredicate[O] {
	return predicate.NewTypedPredicateFuncs(func(o O) bool { return o.GetNamespace() == ns })
}
