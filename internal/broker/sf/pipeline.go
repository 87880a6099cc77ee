package sf

import (
	"context"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/osb"
)

// Every instance and binding endpoint runs the same pipeline: parse (the
// ids, the query and the body, once, into an osbCall and an input of the
// endpoint), validate (against the request itself and the catalog, before
// anything is read), act (read the object fresh and decide, again after a
// write conflict, through retryConflicts), respond (an outcome handed to
// finish). The steps that instances and bindings share live here; the
// endpoints in instances.go and bindings.go only say what differs.

// osbCall is one request to an instance or binding endpoint.
type osbCall struct {
	ctx        context.Context
	x          *osb.Call
	instanceID string
	// bindingID is empty on instance endpoints.
	bindingID string
	// async is accepts_incomplete.
	async bool
	// serviceID is the service_id query parameter of a DELETE.
	serviceID string
}

// newCall returns the osbCall of a request on instanceID (and bindingID).
func newCall(ctx context.Context, x *osb.Call, instanceID, bindingID string) *osbCall {
	return &osbCall{ctx: ctx, x: x, instanceID: instanceID, bindingID: bindingID, async: x.AcceptsIncomplete}
}

// lookFunc reads an object and evaluates its latest operation.
type lookFunc func(context.Context, Read) (client.Object, Operation, progress, error)

// target is what the shared steps need to know of the object a request is
// about: an SFServiceInstance or an SFServiceBinding.
type target struct {
	// keys name the object in log lines (key/value pairs).
	keys []any
	// key is where the object is stored; kind is an empty object of its
	// type, for change notifications.
	key  client.ObjectKey
	kind client.Object
	// collision is the 409 description when another id's object holds
	// the name.
	collision string
	look      lookFunc
	// refresh reads the object fresh.
	refresh func() (client.Object, error)
	// state points at the object's status.state.
	state func(client.Object) *osbv1alpha1.State
	// reset starts a new operation in the object's status.
	reset func(client.Object, osbv1alpha1.State)
}

func (s *Backend) instanceTarget(id string) target {
	return target{
		keys:      []any{"instanceID", id},
		key:       InstanceKey(id),
		kind:      &osbv1alpha1.SFServiceInstance{},
		collision: "An instance with this id already exists under another id's name.",
		look:      s.lookInstance(id),
		refresh:   s.refreshInstance(id),
		state:     func(o client.Object) *osbv1alpha1.State { return &o.(*osbv1alpha1.SFServiceInstance).Status.State },
		reset: func(o client.Object, st osbv1alpha1.State) {
			resetInstanceStatus(&o.(*osbv1alpha1.SFServiceInstance).Status, st)
		},
	}
}

func (s *Backend) bindingTarget(instanceID, bindingID string) target {
	return target{
		keys:      []any{"instanceID", instanceID, "bindingID", bindingID},
		key:       BindingKey(instanceID, bindingID),
		kind:      &osbv1alpha1.SFServiceBinding{},
		collision: "A binding with this id already exists under another id's name.",
		look:      s.lookBinding(instanceID, bindingID),
		refresh:   s.refreshBinding(instanceID, bindingID),
		state:     func(o client.Object) *osbv1alpha1.State { return &o.(*osbv1alpha1.SFServiceBinding).Status.State },
		reset: func(o client.Object, st osbv1alpha1.State) {
			resetBindingStatus(&o.(*osbv1alpha1.SFServiceBinding).Status, st)
		},
	}
}

// errAgain asks retryConflicts to read the object again and decide anew:
// a write lost a race with another writer.
var errAgain = errors.New("decide again on a fresh read")

// again turns a write conflict into errAgain.
func again(err error) error {
	if apierrors.IsConflict(err) {
		return errAgain
	}
	return err
}

// retryConflicts runs one attempt of an endpoint (read fresh, decide, write)
// until it returns anything but errAgain, at most maxAttempts times.
func retryConflicts(attempt func(n int) (int, any, error)) (int, any, error) {
	for n := 0; n < maxAttempts; n++ {
		status, body, err := attempt(n)
		if !errors.Is(err, errAgain) {
			return status, body, err
		}
	}
	return 0, nil, errTooManyConflicts()
}

// logDecision records a decision with the request's identity and the object's ids.
func (s *Backend) logDecision(c *osbCall, t target, msg string, kv ...any) {
	kv = append(append(append([]any{}, t.keys...), kv...), "requestIdentity", c.x.RequestID)
	s.log.V(1).Info(msg, kv...)
}

// releaseTombstone frees the id of an object whose deletion finished, so
// that a request can create it anew at once: it removes the broker's
// finalizer, and the API server removes the object. Another request or the
// reaper releasing it first is no error.
func (s *Backend) releaseTombstone(ctx context.Context, tombstone client.Object) error {
	if !controllerutil.RemoveFinalizer(tombstone, osbv1alpha1.FinalizerBroker) {
		return nil
	}
	if err := s.store.Update(ctx, tombstone); err != nil && !apierrors.IsNotFound(err) {
		return again(err)
	}
	return nil
}

// createNew stores obj, a new object. A tombstone of the same id, when given, is released first. An object that
// appeared meanwhile makes the first attempt decide again; on a later one
// it is another id's object under the same name (409).
func (s *Backend) createNew(c *osbCall, t target, obj, tombstone client.Object, attempt int) error {
	if tombstone != nil {
		if err := s.releaseTombstone(c.ctx, tombstone); err != nil {
			return err
		}
	}
	if err := s.store.Create(c.ctx, obj); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		if attempt > 0 {
			return osb.Conflict("%s", t.collision)
		}
		return errAgain
	}
	// No status write follows: the status subresource cannot be set at
	// create, and an empty state means in_queue to the broker and the
	// provisioner alike, while the label lastoperation (in_queue) records
	// the request on the object already. Writing in_queue as well would
	// cost a write per instance and per binding that carries nothing.
	return nil
}

// begin starts the operation next on an existing object: its status reset
// to state, its spec changed by mutate (nil: unchanged). A write conflict
// is errAgain.
func (s *Backend) begin(c *osbCall, t target, obj client.Object, next Operation, state osbv1alpha1.State, mutate func(client.Object) error) (client.Object, error) {
	obj, err := s.startOperation(c.ctx, obj, next, state, c.x, func(o client.Object) { t.reset(o, state) }, mutate, t.refresh)
	return obj, again(err)
}

// deleteOutcome is the outcome of a deprovision or unbind: {} when done,
// failed building the error of a failed deletion.
func deleteOutcome(async, asyncOnly bool, failed func(progress) *osb.Error) outcome {
	return outcome{
		async:      async,
		asyncOnly:  asyncOnly,
		doneStatus: http.StatusOK,
		done:       func(client.Object) (any, error) { return osb.EmptyObject, nil },
		failed:     failed,
	}
}

// rejoinDeletion answers a DELETE of an object whose deletion started
// before: a failed deletion is tried again as a new operation, one in
// progress is joined. obj was read with read; a failed deletion is
// restarted only on a fresh copy, since restarting writes.
func (s *Backend) rejoinDeletion(c *osbCall, t target, obj client.Object, read Read, op Operation, p progress, o outcome) (int, any, error) {
	if p.state == osb.StateFailed {
		if read != Fresh {
			return 0, nil, errAgain
		}
		next := op.next(OpDelete)
		if _, err := s.begin(c, t, obj, next, osbv1alpha1.StateDelete, nil); err != nil {
			return 0, nil, err
		}
		op = next
	}
	o.accepted = osb.OperationResponse{Operation: op.String()}
	return s.finish(c.ctx, op, o, t)
}

// startDeletion deletes obj as the operation after op (or as op, when a
// previous attempt recorded the delete operation but did not delete) and
// answers its outcome.
func (s *Backend) startDeletion(c *osbCall, t target, obj client.Object, op Operation, o outcome, msg string) (int, any, error) {
	next := op.next(OpDelete)
	if op.Type == OpDelete {
		next = op
	}
	if err := s.deleteObject(c.ctx, obj); err != nil {
		return 0, nil, again(err)
	}
	s.logDeletion(c, t, msg, next)
	o.accepted = osb.OperationResponse{Operation: next.String()}
	return s.finish(c.ctx, next, o, t)
}

// logDeletion records an accepted deletion with the request's
// identities: for audit, as the annotations that an update records on the
// object, which a deletion does not write.
func (s *Backend) logDeletion(c *osbCall, t target, msg string, op Operation) {
	identity := ""
	if c.x.Identity != nil {
		identity = c.x.Identity.Annotation()
	}
	kv := append(append([]any{}, t.keys...), "operation", op.String(), "originatingIdentity", identity, "requestIdentity", c.x.RequestID)
	s.log.Info(msg, kv...)
}

// decisionRead is how an attempt of a deprovision or unbind reads what it
// decides on: the first from the cache (never older than this broker's own
// writes), every later one fresh. The DELETE is conditional on the
// resourceVersion read, so a decision on a stale copy ends in a conflict
// and is taken again on a fresh read; so is a refusal (confirm).
func decisionRead(attempt int) Read {
	if attempt == 0 {
		return Cached
	}
	return Fresh
}

// confirm turns a ConcurrencyError decided on a cached read into errAgain,
// so that the next attempt decides again on a fresh read: the cache may
// still hold an operation that has ended since.
func confirm(read Read, err error) error {
	var oe *osb.Error
	if read != Fresh && errors.As(err, &oe) && oe.Code == osb.CodeConcurrencyError {
		return errAgain
	}
	return err
}

// readForCreate reads the object of a request that creates it when it is
// missing (provision, bind). The first attempt reads the cache alone: a
// new id, the common case, then costs no API request, and an object the
// cache has not seen yet makes the create fail with AlreadyExists, which
// decides again on a fresh read. An object the cache holds is read fresh,
// since the answer is decided on it; so is every later attempt.
func readForCreate[T client.Object](attempt int, read func(Read) (T, error)) (T, error) {
	if attempt == 0 {
		if obj, err := read(CacheOnly); err != nil {
			return obj, err
		}
	}
	return read(Fresh)
}
