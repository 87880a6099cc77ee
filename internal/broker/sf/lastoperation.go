package sf

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/osb"
)

// Objects read by last_operation, reused: it is the endpoint platforms poll,
// and an instance is about a kilobyte to allocate per request. Cached reads
// fill them with references into the cache, so they are only read and are
// cleared before they go back.
var (
	instancePool = sync.Pool{New: func() any { return &osbv1alpha1.SFServiceInstance{} }}
	bindingPool  = sync.Pool{New: func() any { return &osbv1alpha1.SFServiceBinding{} }}
)

// evaluateFunc reads an object and evaluates its latest operation.
type evaluateFunc func(context.Context, Read) (Operation, progress, error)

// InstanceLastOperation answers GET .../service_instances/:id/last_operation.
func (s *Backend) InstanceLastOperation(ctx context.Context, _ *osb.Call, req *osb.LastOperationRequest) (int, any, error) {
	id := req.InstanceID
	key := InstanceKey(id)
	inst := instancePool.Get().(*osbv1alpha1.SFServiceInstance)
	defer func() { *inst = osbv1alpha1.SFServiceInstance{}; instancePool.Put(inst) }()
	return s.lastOperation(ctx, req.Operation, "service instance", func(ctx context.Context, read Read) (Operation, progress, error) {
		*inst = osbv1alpha1.SFServiceInstance{}
		if err := s.store.Get(ctx, key, inst, read); err != nil {
			return Operation{}, progress{}, err
		}
		if inst.Spec.InstanceID != id {
			return Operation{}, progress{}, apierrors.NewNotFound(instanceResource, key.Name)
		}
		if err := checkNamespace(ctx, s.store, id); err != nil {
			return Operation{}, progress{}, err
		}
		op, p := instanceProgress(inst)
		return op, p, nil
	})
}

// BindingLastOperation answers GET .../service_bindings/:binding_id/last_operation.
func (s *Backend) BindingLastOperation(ctx context.Context, _ *osb.Call, req *osb.LastOperationRequest) (int, any, error) {
	instanceID, bindingID := req.InstanceID, req.BindingID
	key := BindingKey(instanceID, bindingID)
	b := bindingPool.Get().(*osbv1alpha1.SFServiceBinding)
	defer func() { *b = osbv1alpha1.SFServiceBinding{}; bindingPool.Put(b) }()
	return s.lastOperation(ctx, req.Operation, "service binding", func(ctx context.Context, read Read) (Operation, progress, error) {
		*b = osbv1alpha1.SFServiceBinding{}
		if err := s.store.Get(ctx, key, b, read); err != nil {
			return Operation{}, progress{}, err
		}
		if b.Spec.ID != bindingID || b.Spec.InstanceID != instanceID {
			return Operation{}, progress{}, apierrors.NewNotFound(bindingResource, key.Name)
		}
		if err := checkNamespace(ctx, s.store, instanceID); err != nil {
			return Operation{}, progress{}, err
		}
		op, p := bindingProgress(b)
		return op, p, nil
	})
}

// lastOperation reports the state of an operation. It reads from the cache:
// only when the cache holds an older operation than the one asked for (it
// lags behind a write) does it read the stored object. A missing object is
// 410 Gone when a delete is polled (the deletion finished and its tombstone
// was released) and 404 otherwise; so is an object of the same id created
// after the polled delete (the tombstone was released for the new one).
func (s *Backend) lastOperation(ctx context.Context, operation, what string, look evaluateFunc) (int, any, error) {
	asked, err := askedOperation(operation)
	if err != nil {
		return 0, nil, err
	}
	cur, p, err := look(ctx, Cached)
	if err == nil && asked != nil && asked.Seq > cur.Seq {
		cur, p, err = look(ctx, Fresh)
	}
	if apierrors.IsNotFound(err) {
		if asked != nil && asked.Type == OpDelete {
			return http.StatusGone, osb.EmptyObject, nil
		}
		return 0, nil, osb.NotFound("The %s does not exist.", what)
	}
	if err != nil {
		return 0, nil, err
	}
	if asked != nil {
		switch {
		case asked.Seq > cur.Seq || (asked.Seq == cur.Seq && asked.Type != cur.Type):
			return 0, nil, osb.BadRequest("Operation %s is unknown for this %s (its latest is %s).", asked, what, cur)
		case asked.Seq < cur.Seq && asked.Type == OpDelete && cur.Type != OpDelete:
			// Nothing but a delete follows a delete on the same object:
			// the deletion finished and the id was provisioned or bound
			// anew, its operations counted on from the tombstone's. The
			// platform is told what a released tombstone tells it.
			return http.StatusGone, osb.EmptyObject, nil
		case asked.Seq < cur.Seq:
			// The platform polls an operation that a later one replaced
			// (a deprovision during provisioning, say). Its outcome is no
			// longer known; it did not finish as asked.
			p = progress{state: osb.StateFailed, description: "The operation was superseded by " + cur.String() + "."}
		}
	}
	return http.StatusOK, osb.RawJSON(appendLastOperation(make([]byte, 0, 64+len(p.description)), p)), nil
}

// askedOperation parses the operation a poll names, nil when none.
func askedOperation(operation string) (*Operation, error) {
	if operation == "" {
		return nil, nil
	}
	op, err := ParseOperation(operation)
	if err != nil {
		return nil, osb.BadRequest("operation %q: %v.", osb.Truncate(operation, 100), err)
	}
	return &op, nil
}

// appendLastOperation encodes the last_operation body, as
// lastOperationResponse would marshal, without reflection: this is the
// endpoint platforms poll.
func appendLastOperation(b []byte, p progress) []byte {
	b = append(b, `{"state":`...)
	b = appendJSONString(b, p.state)
	if p.description != "" {
		b = append(b, `,"description":`...)
		b = appendJSONString(b, p.description)
	}
	if p.instanceUsable != nil {
		b = append(b, `,"instance_usable":`...)
		b = strconv.AppendBool(b, *p.instanceUsable)
	}
	if p.updateRepeatable != nil {
		b = append(b, `,"update_repeatable":`...)
		b = strconv.AppendBool(b, *p.updateRepeatable)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD, as
// encoding/json does (without its optional HTML escaping).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
