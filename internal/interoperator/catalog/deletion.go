package catalog

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/names"
)

// FinalizerPrefix is the prefix of the finalizer an inter-operator puts on
// the SFServices and SFPlans of its catalog (Finalizer).
const FinalizerPrefix = "catalog.interoperator.marketplane.io/"

// finalizerNameMax is the longest name part (after the prefix) of a
// finalizer.
const finalizerNameMax = 63

// blockedNames is how many instances the DeletionBlocked message names.
const blockedNames = 10

// Finalizer is the finalizer with which the inter-operator named
// providerName, in environment (empty: none), keeps the catalog entries
// that its instances still use: one per inter-operator, so that two
// sharing a catalog namespace each hold, and release, only their own.
// Names too long for a finalizer are shortened with a hash.
func Finalizer(providerName, environment string) string {
	name := providerName
	if environment != "" {
		name += "." + environment
	}
	if len(validation.IsQualifiedName(FinalizerPrefix+name)) == 0 {
		return FinalizerPrefix + name
	}
	return FinalizerPrefix + names.WithHash("p", name, finalizerNameMax)
}

// entryUsers are the instances that keep catalog entries, by OSB id.
type entryUsers struct {
	reader       client.Reader
	environment  string
	planIndex    string
	serviceIndex string
}

// of returns namespace/name of the instances whose spec names id in the
// indexed field, sorted. Instances labelled for another environment are
// another inter-operator's and do not count.
func (u entryUsers) of(ctx context.Context, index, id string) ([]string, error) {
	list := &osbv1alpha1.SFServiceInstanceList{}
	if err := u.reader.List(ctx, list, client.MatchingFields{index: id}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the instances with %s %q: %w", index, id, err)
	}
	var out []string
	for i := range list.Items {
		inst := &list.Items[i]
		if env := inst.Labels[providerv1alpha1.EnvironmentLabel]; u.environment != "" && env != "" && env != u.environment {
			continue
		}
		out = append(out, inst.Namespace+"/"+inst.Name)
	}
	sort.Strings(out)
	return out, nil
}

// current reports whether entry is the one of its id that the look-ups
// (Plan, Service) return, of the entries of its namespace: only that one
// is used by the instances with its id. An entry being deleted is
// current while no entry of its id that is not being deleted exists, and
// it is the oldest of those being deleted.
func current(entry metav1.Object, id string, all []metav1.Object, idOf func(metav1.Object) string) bool {
	for _, other := range all {
		if other.GetUID() == entry.GetUID() || idOf(other) != id {
			continue
		}
		if better(other, entry) {
			return false
		}
	}
	return true
}

// better reports whether the look-ups prefer a to b: an entry not being
// deleted, else the older one.
func better(a, b metav1.Object) bool {
	aLive, bLive := a.GetDeletionTimestamp() == nil, b.GetDeletionTimestamp() == nil
	if aLive != bLive {
		return aLive
	}
	return older(a.GetCreationTimestamp().Time, a.GetName(), b.GetCreationTimestamp().Time, b.GetName())
}

// blockedMessage says that the deletion of an entry of kind ("plan" or
// "service") waits for users, naming the first blockedNames.
func blockedMessage(kind string, users []string) string {
	n := len(users)
	what := fmt.Sprintf("%d instances", n)
	if n == 1 {
		what = "1 instance"
	}
	shown := users
	more := ""
	if n > blockedNames {
		shown = users[:blockedNames]
		more = fmt.Sprintf(" and %d more", n-blockedNames)
	}
	return fmt.Sprintf("the deletion waits for %s of the %s: %s%s; deprovision them, or delete the ProviderConfig to release the catalog", what, kind, strings.Join(shown, ", "), more)
}

// patchFinalizer adds or removes the finalizer on obj with a patch that
// conflicts when the finalizers changed since obj was read, so that no
// other finalizer is lost.
func patchFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string, change func(client.Object, string) bool) error {
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("copy %s %s/%s", kindOf(obj), obj.GetNamespace(), obj.GetName())
	}
	if !change(obj, finalizer) {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		return fmt.Errorf("update the finalizers of %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// release removes the finalizer from every SFService and SFPlan of
// namespace that holds it: the inter-operator no longer serves that
// namespace (its ProviderConfig is gone, being deleted, or names another
// catalog namespace), so nothing of its own is left to keep.
func (r *Reconciler) release(ctx context.Context, namespace string) error {
	c := r.platform.GetClient()
	services := &osbv1alpha1.SFServiceList{}
	if err := c.List(ctx, services, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("list SFServices in %s: %w", namespace, err)
	}
	plans := &osbv1alpha1.SFPlanList{}
	if err := c.List(ctx, plans, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("list SFPlans in %s: %w", namespace, err)
	}
	var objs []client.Object
	for i := range services.Items {
		objs = append(objs, &services.Items[i])
	}
	for i := range plans.Items {
		objs = append(objs, &plans.Items[i])
	}
	for _, o := range objs {
		if err := patchFinalizer(ctx, c, o, r.finalizer, controllerutil.RemoveFinalizer); err != nil {
			return err
		}
	}
	return nil
}
