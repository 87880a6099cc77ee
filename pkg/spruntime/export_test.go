package spruntime

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AddFinalizer adds finalizer to obj with c as the reconciler does before
// it calls CreateOrUpdate, for the tests of package spruntime_test.
func AddFinalizer[T API](ctx context.Context, c client.Client, obj T, finalizer string) error {
	r := &APIReconciler[T, *fakeConfig]{client: c, finalizer: finalizer}
	return r.addFinalizer(ctx, obj)
}
