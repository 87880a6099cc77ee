package sf

import (
	"errors"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/osb"
)

// Metadata the broker writes on the objects it records.
const (
	// AnnotationOperation holds the id of the object's latest operation,
	// "<create|update|delete>-<n>".
	AnnotationOperation = "broker.marketplane.io/operation"
	// AnnotationOriginatingIdentity records, for audit, the
	// X-Broker-API-Originating-Identity of the latest request that changed
	// the object: "<platform> <identity JSON>".
	AnnotationOriginatingIdentity = "broker.marketplane.io/originating-identity"
	// AnnotationRequestIdentity records the X-Broker-API-Request-Identity of
	// the latest request that changed the object.
	AnnotationRequestIdentity = "broker.marketplane.io/request-identity"
	// AnnotationMaintenanceVersion records the plan's maintenance_info
	// version the instance was provisioned or last updated with.
	AnnotationMaintenanceVersion = "broker.marketplane.io/maintenance-version"
	// AnnotationInstanceID records, on an instance's namespace, the OSB
	// instance id the broker created the namespace for.
	AnnotationInstanceID = "broker.marketplane.io/instance-id"
	// LabelManagedBy marks the namespaces the broker created; only those
	// are deleted with their instance.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByBroker is the value of LabelManagedBy.
	ManagedByBroker = "marketplane-broker"
)

// OpType is the kind of an OSB operation.
type OpType string

// Operation kinds.
const (
	OpCreate OpType = "create"
	OpUpdate OpType = "update"
	OpDelete OpType = "delete"
)

// Operation identifies one operation on one object. Seq counts the
// operations of the object, starting at 1 with its creation.
type Operation struct {
	Type OpType
	Seq  int64
}

// String returns the id sent to platforms as "operation".
func (o Operation) String() string {
	return string(o.Type) + "-" + strconv.FormatInt(o.Seq, 10)
}

// next returns the operation that follows o.
func (o Operation) next(t OpType) Operation { return Operation{Type: t, Seq: o.Seq + 1} }

var errBadOperation = errors.New(`not an operation of this broker (want "create-<n>", "update-<n>" or "delete-<n>")`)

// ParseOperation parses an operation id.
func ParseOperation(s string) (Operation, error) {
	t, n, ok := strings.Cut(s, "-")
	if !ok {
		return Operation{}, errBadOperation
	}
	switch OpType(t) {
	case OpCreate, OpUpdate, OpDelete:
	default:
		return Operation{}, errBadOperation
	}
	if n == "" || n[0] == '0' || n[0] == '+' {
		return Operation{}, errBadOperation
	}
	seq, err := strconv.ParseInt(n, 10, 64)
	if err != nil || seq < 1 {
		return Operation{}, errBadOperation
	}
	return Operation{Type: OpType(t), Seq: seq}, nil
}

// currentOperation returns the latest operation of obj. Objects the broker
// did not write (no annotation) get one from Service Fabrik's lastoperation
// label. An object being deleted is in a delete operation even when the
// annotation was not written yet.
func currentOperation(obj metav1.Object) Operation {
	op, err := ParseOperation(obj.GetAnnotations()[AnnotationOperation])
	if err != nil {
		op = Operation{Type: OpCreate, Seq: 1}
		switch osbv1alpha1.State(obj.GetLabels()[osbv1alpha1.LabelLastOperation]) {
		case osbv1alpha1.StateUpdate:
			op.Type = OpUpdate
		case osbv1alpha1.StateDelete:
			op.Type = OpDelete
		}
	}
	if obj.GetDeletionTimestamp() != nil && op.Type != OpDelete {
		op = op.next(OpDelete)
	}
	return op
}

// IsTombstone reports whether obj's deletion finished: it is being
// deleted and no finalizer is left but the broker's, which keeps it as a
// tombstone.
func IsTombstone(obj metav1.Object) bool { return deletionFinished(obj) }

// deletionFinished reports whether obj is a tombstone: being deleted, with
// no finalizer left but the broker's.
func deletionFinished(obj metav1.Object) bool {
	if obj.GetDeletionTimestamp() == nil {
		return false
	}
	for _, f := range obj.GetFinalizers() {
		if f != osbv1alpha1.FinalizerBroker {
			return false
		}
	}
	return true
}

// progress is the OSB view of an operation.
type progress struct {
	state            string
	description      string
	instanceUsable   *bool
	updateRepeatable *bool
	// gone is set for a finished deletion (a tombstone).
	gone bool
}

func (p progress) running() bool { return p.state == osb.StateInProgress }

// instanceProgress returns the latest operation of inst and how far it got.
// A terminal state the provisioner wrote for an older generation of the
// spec is not trusted: the operation is then still in progress.
func instanceProgress(inst *osbv1alpha1.SFServiceInstance) (Operation, progress) {
	op := currentOperation(inst)
	st := &inst.Status
	p := evaluate(inst, st.State, st.ObservedGeneration, st.Description, st.Error)
	if p.state == osb.StateFailed {
		switch op.Type {
		case OpUpdate:
			p.instanceUsable, p.updateRepeatable = parseFlag(st.InstanceUsable), parseFlag(st.UpdateRepeatable)
		case OpDelete:
			p.instanceUsable = parseFlag(st.InstanceUsable)
		}
	}
	return op, p
}

// bindingProgress returns the latest operation of b and how far it got.
func bindingProgress(b *osbv1alpha1.SFServiceBinding) (Operation, progress) {
	st := &b.Status
	return currentOperation(b), evaluate(b, st.State, st.ObservedGeneration, "", st.Error)
}

// evaluate maps the state the provisioner reported for observed, the
// generation it saw, to OSB's. A terminal state for an older generation
// is not trusted; a provisioner that reports no generation (observed 0) is,
// except on a deletion: the broker writes nothing on the object when it
// deletes it, so the status still holds the previous operation's outcome
// until the provisioner reports on the generation the deletion raised.
func evaluate(obj metav1.Object, state osbv1alpha1.State, observed int64, description, errMsg string) progress {
	stale := observed != 0 && observed < obj.GetGeneration()
	if obj.GetDeletionTimestamp() != nil {
		switch {
		case deletionFinished(obj):
			return progress{state: osb.StateSucceeded, gone: true}
		case state == osbv1alpha1.StateFailed && observed >= obj.GetGeneration():
			return progress{state: osb.StateFailed, description: firstNonEmpty(errMsg, description, "Deletion failed.")}
		}
		return progress{state: osb.StateInProgress, description: description}
	}
	switch state {
	case osbv1alpha1.StateSucceeded:
		if !stale {
			return progress{state: osb.StateSucceeded, description: description}
		}
	case osbv1alpha1.StateFailed:
		if !stale {
			return progress{state: osb.StateFailed, description: firstNonEmpty(errMsg, description, "The operation failed.")}
		}
	}
	return progress{state: osb.StateInProgress, description: description}
}

func parseFlag(s string) *bool {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return nil
	}
	return &b
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
