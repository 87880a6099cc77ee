package sf

import (
	"context"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/osb"
)

// maxAttempts bounds how often a request re-reads and decides again after a
// write conflict.
const maxAttempts = 5

// refreshTimeout bounds the fresh reads of retried writes.
const refreshTimeout = 15 * time.Second

func errTooManyConflicts() *osb.Error {
	return osb.ConcurrencyError("The resource kept changing while the broker handled the request; try again.")
}

// markOperation sets the metadata that names obj's current operation: the
// operation id, Service Fabrik's lastoperation label and, for audit, the
// identities of the request.
func markOperation(obj client.Object, op Operation, state osbv1alpha1.State, x *osb.Call) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationOperation] = op.String()
	if x.Identity != nil {
		ann[AnnotationOriginatingIdentity] = x.Identity.Annotation()
	} else {
		delete(ann, AnnotationOriginatingIdentity)
	}
	if x.RequestID != "" {
		ann[AnnotationRequestIdentity] = osb.Truncate(x.RequestID, 253)
	} else {
		delete(ann, AnnotationRequestIdentity)
	}
	obj.SetAnnotations(ann)
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[osbv1alpha1.LabelLastOperation] = string(state)
	obj.SetLabels(labels)
}

// resetInstanceStatus starts a new operation in an instance's status: the
// state the broker writes, and nothing left of the previous operation's
// outcome.
func resetInstanceStatus(st *osbv1alpha1.SFServiceInstanceStatus, state osbv1alpha1.State) {
	st.State, st.Error, st.Description, st.InstanceUsable, st.UpdateRepeatable = state, "", "", "", ""
}

// resetBindingStatus does the same for a binding's status.
func resetBindingStatus(st *osbv1alpha1.SFServiceBindingStatus, state osbv1alpha1.State) {
	st.State, st.Error = state, ""
}

// startOperation starts op on an existing object: the status first (set by
// setStatus), then metadata and spec (mutate, plus markOperation). A
// conflict on the status write is returned, so that the caller decides
// again from a fresh read; the metadata write is retried on fresh reads
// until it lands, because the status already announces the operation.
// The second write is what wakes the provisioner, which reconciles on
// generation, label and annotation changes but not on status changes;
// when it fails, the first only makes the provisioner re-apply what it
// already had. refresh must return a fresh copy of the object.
func (s *Backend) startOperation(ctx context.Context, obj client.Object, op Operation, state osbv1alpha1.State, x *osb.Call,
	setStatus func(client.Object), mutate func(client.Object) error, refresh func() (client.Object, error)) (client.Object, error) {
	setStatus(obj)
	if err := s.store.UpdateStatus(ctx, obj); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if mutate != nil {
			if err := mutate(obj); err != nil {
				return nil, err
			}
		}
		markOperation(obj, op, state, x)
		err := s.store.Update(ctx, obj)
		if err == nil {
			return obj, nil
		}
		if !apierrors.IsConflict(err) || attempt >= maxAttempts {
			return nil, err
		}
		if obj, err = refresh(); err != nil {
			return nil, err
		}
		if cur := currentOperation(obj); cur.Seq >= op.Seq {
			return nil, osb.ConcurrencyError("Another request started an operation on this resource at the same time.")
		}
	}
}

// deleteObject starts the deletion of obj: one DELETE, conditional on the
// UID and the resourceVersion of the copy the request decided on, so that a
// decision taken on a cached copy that has changed since is taken again on
// a fresh read (Conflict). Nothing else is written. The deletion timestamp
// makes the object's latest operation a delete (currentOperation), and the
// provisioner acts on it; a status written before the deletion counts as
// the deletion's outcome only once the provisioner reported on the
// generation the deletion raised (evaluate), so it needs no reset. The
// request's identities, which an update or create records on the object,
// go to the log (logDeletion).
func (s *Backend) deleteObject(ctx context.Context, obj client.Object) error {
	if err := s.store.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// outcome is what a request that started or joined an operation answers.
type outcome struct {
	// async: the platform accepts an asynchronous answer.
	async bool
	// asyncOnly: the plan finishes this operation only asynchronously.
	asyncOnly bool
	// doneStatus is the status of a synchronous success.
	doneStatus int
	// accepted is the body of 202.
	accepted any
	// done builds the body of a synchronous success from the final object.
	done func(client.Object) (any, error)
	// failed builds the error of a synchronous failure.
	failed func(progress) *osb.Error
}

// finish answers a request that started or joined the operation op on
// t's object. For an asynchronous plan that is 202 at once; otherwise the
// request waits until the operation ends (t.look reads and evaluates the
// object) and answers its outcome, or, after the sync timeout, 202 when the
// platform accepts it and 504 when not.
func (s *Backend) finish(ctx context.Context, op Operation, o outcome, t target) (int, any, error) {
	if o.asyncOnly {
		return http.StatusAccepted, o.accepted, nil
	}
	obj, p, done, err := s.await(ctx, op, t)
	if err != nil {
		return 0, nil, err
	}
	if !done {
		if o.async {
			return http.StatusAccepted, o.accepted, nil
		}
		return 0, nil, osb.NewError(http.StatusGatewayTimeout, "",
			"The operation did not finish within %s and continues in the background; the platform did not accept an asynchronous answer (accepts_incomplete=true).", s.syncTimeout)
	}
	if p.state == osb.StateFailed {
		return 0, nil, o.failed(p)
	}
	body, err := o.done(obj)
	if err != nil {
		return 0, nil, err
	}
	return o.doneStatus, body, nil
}

// await waits until op ends on t's object, the sync timeout passes (done
// is false) or ctx ends. A vanished object ends a delete successfully and
// any other operation as failed.
//
// With a Store that notifies of changes (Notifier), the request reads the
// object from the cache each time the cache sees it change, and otherwise
// only every recheck interval, a safety net that also reads through to the
// API server; no request polls. Without one it polls every poll interval.
// A create or update reads the cache alone between rechecks: an object
// the cache has not seen yet is then not taken for deleted, and costs no
// API request, since the notification follows when the cache sees it.
// A delete reads with the fallback, since the object's absence is its
// success.
func (s *Backend) await(ctx context.Context, op Operation, t target) (client.Object, progress, bool, error) {
	deadline := time.NewTimer(s.syncTimeout)
	defer deadline.Stop()
	notifier, notifies := s.store.(Notifier)
	interval := s.pollInterval
	if notifies {
		interval = s.recheckInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	between := Cached
	if notifies && op.Type != OpDelete {
		between = CacheOnly
	}
	read := between
	// stop ends the latest subscription: at the next round and on return.
	stop := func() {}
	defer func() { stop() }()
	for {
		stop()
		var changed <-chan struct{}
		if notifies {
			// Subscribe before reading, so that no change between the
			// read and the wait goes unnoticed.
			changed, stop = notifier.Notify(t.key, t.kind)
		}
		obj, cur, p, err := t.look(ctx, read)
		switch {
		case apierrors.IsNotFound(err) && read == CacheOnly:
			// Not in the cache yet (or deleted: the recheck reads
			// through).
		case apierrors.IsNotFound(err):
			if op.Type == OpDelete {
				return nil, progress{state: osb.StateSucceeded, gone: true}, true, nil
			}
			return nil, progress{state: osb.StateFailed, description: "The resource was deleted while the operation ran."}, true, nil
		case err != nil:
			return nil, progress{}, false, err
		case cur.Seq > op.Seq:
			return nil, progress{state: osb.StateFailed, description: "The operation was superseded by " + cur.String() + "."}, true, nil
		case cur.Seq == op.Seq && !p.running():
			return obj, p, true, nil
		}
		read = between
		select {
		case <-ctx.Done():
			return nil, progress{}, false, ctx.Err()
		case <-deadline.C:
			return nil, progress{}, false, nil
		case <-changed:
		case <-tick.C:
			read = Cached
		}
	}
}

// dashboardURL returns the instance's dashboard URL: the one the
// provisioner reported, else the plan's dashboard_url_template expanded.
func dashboardURL(plan *catalog.Plan, inst *osbv1alpha1.SFServiceInstance) string {
	if inst.Status.DashboardURL != "" {
		return inst.Status.DashboardURL
	}
	if plan == nil || plan.DashboardURLTemplate == "" {
		return ""
	}
	return expandDashboardTemplate(plan.DashboardURLTemplate, inst)
}

// expandDashboardTemplate fills Service Fabrik's dashboard_url_template.
// Only the instance's ids can be used: ${instance.id},
// ${instance.instance_id}, ${instance.plan_id}, ${instance.service_id}. A
// template with anything else yields no URL.
func expandDashboardTemplate(t string, inst *osbv1alpha1.SFServiceInstance) string {
	out := strings.NewReplacer(
		"${instance.id}", inst.Spec.InstanceID,
		"${instance.instance_id}", inst.Spec.InstanceID,
		"${instance.plan_id}", inst.Spec.PlanID,
		"${instance.service_id}", inst.Spec.ServiceID,
	).Replace(t)
	if strings.Contains(out, "${") {
		return ""
	}
	return out
}
