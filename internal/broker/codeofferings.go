package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
)

// What the broker records for an instance of a code-based offering (with
// LabelManagedBy and AnnotationInstanceID, as on SF namespaces). The
// record is the instance's namespace on the onboarding cluster,
// osb-<name>, created with these labels and annotations; only the UID of
// the provider's object is added once the object exists. The state of the
// instance is read from the objects themselves (the provider's object, the
// ManagedControlPlane, the AccessRequests), so a broker restart loses
// nothing.
const (
	// CodeNamespacePrefix starts the namespace of every instance of a
	// code-based offering: osb-<ObjectName(instance id)>.
	CodeNamespacePrefix = "osb-"
	// LabelCodeInstance holds the namespace of the instance an object
	// belongs to (AccessRequests of bindings, the ManagedControlPlane and
	// the provider's object).
	LabelCodeInstance = "broker.marketplane.io/code-instance"
	// AnnotationBindingID holds the OSB binding id (AccessRequests).
	AnnotationBindingID = "broker.marketplane.io/binding-id"
	// AnnotationServiceID and AnnotationPlanID hold the OSB ids the
	// instance was provisioned with.
	AnnotationServiceID = "broker.marketplane.io/service-id"
	AnnotationPlanID    = "broker.marketplane.io/plan-id"
	// AnnotationRequestHash is the SHA-256 of service id, plan id and
	// parameters: an identical re-sent provision is answered as the first
	// one, another is a conflict.
	AnnotationRequestHash = "broker.marketplane.io/request-hash"
	// AnnotationObject is the provider's object of the instance, JSON
	// {"apiVersion","kind","namespace","name","uid"}. The uid is written
	// once the object exists: an object of that name with another UID is
	// not the instance's.
	AnnotationObject = "broker.marketplane.io/object"
	// AnnotationOwnsControlPlane is "true" when the broker created the
	// ManagedControlPlane (and deletes it), "false" when the
	// provision named an existing one.
	AnnotationOwnsControlPlane = "broker.marketplane.io/owns-control-plane"
	// AnnotationAllowInstance on a ManagedControlPlane lets the OSB
	// instance whose id it holds use that control plane
	// (catalog.ControlPlaneParameter). Nothing else lets an OSB request
	// touch a control plane the broker did not create.
	AnnotationAllowInstance = "broker.marketplane.io/osb-instance-id"
)

// OSB operations of code-based instances. They are not of the form
// "<verb>-<n>" of the SF part, so a poll names the backend it belongs to.
const (
	operationProvision   = "provision"
	operationDeprovision = "deprovision"
	operationUpdate      = "update"
)

// conditionSynced is the provider runtime's condition of the last
// reconcile (pkg/spruntime).
const conditionSynced = "Synced"

// CodeOfferings serves the OSB endpoints for instances of code-based
// offerings (ServiceProviders that opted in, catalog.BuildCode):
// provisioning creates the provider's object for a ManagedControlPlane,
// binding an AccessRequest for that control plane with the offering's
// rules.
type CodeOfferings struct {
	catalog    Catalog
	onboarding client.Client
	platform   client.Client
	// accessNamespace is the broker's namespace on the platform cluster,
	// where the AccessRequests of bindings and their kubeconfig Secrets
	// live.
	accessNamespace string
	// sf reads SFServiceInstances, so that an id is never used by both
	// backends; nil skips the check.
	sf           Store
	log          logr.Logger
	pollInterval time.Duration
	bindTimeout  time.Duration
}

// CodeOption configures CodeOfferings.
type CodeOption func(*CodeOfferings)

// WithCodeLogger sets the logger.
func WithCodeLogger(l logr.Logger) CodeOption { return func(c *CodeOfferings) { c.log = l } }

// WithSFStore lets provisioning refuse an instance id that an
// SFServiceInstance already uses.
func WithSFStore(s Store) CodeOption { return func(c *CodeOfferings) { c.sf = s } }

// WithBindTimeout bounds how long a bind waits for its AccessRequest to be
// granted and an unbind for it to be revoked (default DefaultSyncTimeout).
func WithBindTimeout(d time.Duration) CodeOption { return func(c *CodeOfferings) { c.bindTimeout = d } }

// NewCodeOfferings returns the backend of code-based offerings. cat must
// be the catalog whose snapshots carry the code-based offerings
// (catalog.Merge, MergedCatalog); onboarding writes namespaces,
// ManagedControlPlanes and the providers' objects; platform writes
// AccessRequests and reads their Secrets in accessNamespace.
func NewCodeOfferings(cat Catalog, onboarding, platform client.Client, accessNamespace string, opts ...CodeOption) (*CodeOfferings, error) {
	if cat == nil || onboarding == nil || platform == nil || accessNamespace == "" {
		return nil, errors.New("code-based offerings: a catalog, both clusters and an access namespace are required")
	}
	c := &CodeOfferings{catalog: cat, onboarding: onboarding, platform: platform, accessNamespace: accessNamespace,
		log: logr.Discard(), pollInterval: 100 * time.Millisecond, bindTimeout: DefaultSyncTimeout}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// CodeNamespace returns the namespace that records the code-based instance
// instanceID.
func CodeNamespace(instanceID string) string { return CodeNamespacePrefix + ObjectName(instanceID) }

// BindingAccessRequestName returns the name of the AccessRequest of a
// binding: osb-<hex SHA-224 of the binding id>, cut to 60 characters.
func BindingAccessRequestName(bindingID string) string {
	sum := sha256.Sum224([]byte(bindingID))
	return "osb-" + hex.EncodeToString(sum[:])
}

// objectRef names the provider's object of an instance. UID is empty
// until the object exists (and in records of earlier versions).
type objectRef struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid,omitempty"`
}

func (o objectRef) new() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(o.APIVersion)
	u.SetKind(o.Kind)
	u.SetNamespace(o.Namespace)
	u.SetName(o.Name)
	return u
}

func (o objectRef) key() client.ObjectKey {
	return client.ObjectKey{Namespace: o.Namespace, Name: o.Name}
}

func (o objectRef) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// record is the namespace of a code-based instance, read.
type record struct {
	ns        *corev1.Namespace
	id        string
	serviceID string
	planID    string
	hash      string
	object    objectRef
	ownsMCP   bool
}

// getRecord reads the record of instance id; nil, nil when there is none.
// A namespace of that name that the broker did not create for this id is
// a conflict.
func (c *CodeOfferings) getRecord(ctx context.Context, id string) (*record, error) {
	ns := &corev1.Namespace{}
	if err := c.onboarding.Get(ctx, client.ObjectKey{Name: CodeNamespace(id)}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get namespace %s: %w", CodeNamespace(id), err)
	}
	a := ns.Annotations
	if !OwnsNamespace(ns, id) {
		return nil, conflict("The namespace %s of this instance exists and does not belong to it; choose another instance id.", ns.Name)
	}
	rec := &record{ns: ns, id: id, serviceID: a[AnnotationServiceID], planID: a[AnnotationPlanID], hash: a[AnnotationRequestHash],
		ownsMCP: a[AnnotationOwnsControlPlane] == "true"}
	if err := json.Unmarshal([]byte(a[AnnotationObject]), &rec.object); err != nil {
		return nil, fmt.Errorf("namespace %s: annotation %s: %w", ns.Name, AnnotationObject, err)
	}
	return rec, nil
}

// existingRecord is getRecord for requests on an instance that must exist:
// 404 when there is none.
func (c *CodeOfferings) existingRecord(ctx context.Context, id string) (*record, error) {
	rec, err := c.getRecord(ctx, id)
	if err == nil && rec == nil {
		err = notFound("Instance %s does not exist.", truncate(id, 100))
	}
	return rec, err
}

// owns reports whether instance id is a code-based instance.
func (c *CodeOfferings) owns(ctx context.Context, id string) (bool, error) {
	ns := &corev1.Namespace{}
	err := c.onboarding.Get(ctx, client.ObjectKey{Name: CodeNamespace(id)}, ns)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get namespace %s: %w", CodeNamespace(id), err)
	}
	return ns.Labels[LabelManagedBy] == ManagedByBroker && ns.Annotations[AnnotationInstanceID] != "", nil
}

// serves reports whether serviceID is a code-based offering of the catalog.
func (c *CodeOfferings) serves(serviceID string) bool {
	return serviceID != "" && c.catalog.Snapshot().Code().Service(serviceID) != nil
}

// requestHash identifies a provision request's attributes.
func requestHash(serviceID, planID string, params map[string]json.RawMessage) string {
	// Keys sorted by json.Marshal: the same parameters hash alike. The
	// values were decoded from JSON, so they encode again.
	canon, err := json.Marshal(params)
	if err != nil {
		canon = []byte(err.Error())
	}
	sum := sha256.Sum256([]byte(serviceID + "\x00" + planID + "\x00" + string(canon)))
	return hex.EncodeToString(sum[:])
}

// controlPlaneRef is the value of catalog.ControlPlaneParameter.
type controlPlaneRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// provision creates the instance: its namespace (the record), the
// ManagedControlPlane unless the parameters name one the instance may use,
// and the provider's object with the parameters as spec. It answers 202;
// last_operation follows the object's Ready condition.
func (c *CodeOfferings) provision(x *exchange, r *http.Request) (int, any, error) {
	call, err := parseCall(x, r, parseAsync)
	if err != nil {
		return 0, nil, err
	}
	ctx, id, incomplete := call.ctx, call.instanceID, call.async
	var req provisionRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if err := checkPlatform(x.identity, req.Context); err != nil {
		return 0, nil, err
	}
	if req.ServiceID == "" || req.PlanID == "" {
		return 0, nil, badRequest("service_id and plan_id are required.")
	}
	params := map[string]json.RawMessage{}
	if len(req.Parameters) > 0 && string(req.Parameters) != "null" {
		if err := json.Unmarshal(req.Parameters, &params); err != nil {
			return 0, nil, badRequest("parameters must be a JSON object.")
		}
	}
	hash := requestHash(req.ServiceID, req.PlanID, params)

	rec, err := c.getRecord(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if rec != nil {
		return c.provisionAgain(ctx, rec, hash, canonicalRequestHash(req.ServiceID, req.PlanID, req.Parameters))
	}
	code := c.catalog.Snapshot().Code()
	svc := code.Service(req.ServiceID)
	if svc == nil {
		return 0, nil, badRequest("service_id %q is not a service offering of this broker's catalog.", truncate(req.ServiceID, 100))
	}
	plan := code.Plan(req.PlanID)
	if plan == nil || plan.ServiceID != svc.ID {
		return 0, nil, badRequest("plan_id %q is not a plan of service offering %s.", truncate(req.PlanID, 100), svc.Name)
	}
	if !incomplete {
		return 0, nil, asyncRequired("service plan")
	}
	raw := req.Parameters
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := plan.CreateSchema.Validate(raw); err != nil {
		return 0, nil, badRequest("The parameters do not match the schema of plan %s (the spec of %s): %v.", plan.Name, plan.Kind, err)
	}
	if c.sf != nil {
		// An SFServiceInstance counts only in a namespace the broker
		// made for it: a tenant's namespace of that name blocks nothing.
		_, err := getOwnedInstance(ctx, c.sf, id, Fresh)
		switch {
		case err == nil:
			return 0, nil, conflict("Instance %s already exists (a Service Fabrik instance).", truncate(id, 100))
		case !apierrors.IsNotFound(err):
			return 0, nil, err
		}
	}

	nsName := CodeNamespace(id)
	mcpKey := client.ObjectKey{Namespace: nsName, Name: ObjectName(id)}
	owns := true
	if cpRaw, ok := params[catalog.ControlPlaneParameter]; ok {
		var ref controlPlaneRef
		if err := json.Unmarshal(cpRaw, &ref); err != nil {
			return 0, nil, badRequest("%s must be {\"namespace\": …, \"name\": …}.", catalog.ControlPlaneParameter)
		}
		if err := c.mayUse(ctx, id, ref); err != nil {
			return 0, nil, err
		}
		mcpKey, owns = client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, false
	}
	spec := map[string]json.RawMessage{}
	for k, v := range params {
		if k != catalog.ControlPlaneParameter {
			spec[k] = v
		}
	}
	ref := objectRef{APIVersion: schema.GroupVersion{Group: plan.Group, Version: plan.Version}.String(), Kind: plan.Kind,
		Namespace: mcpKey.Namespace, Name: mcpKey.Name}
	if !owns {
		err := c.onboarding.Get(ctx, ref.key(), ref.new())
		switch {
		case err == nil:
			return 0, nil, conflict("ManagedControlPlane %s already has a %s; a control plane has at most one of each kind.", mcpKey, plan.Kind)
		case !apierrors.IsNotFound(err):
			return 0, nil, fmt.Errorf("get %s: %w", ref, err)
		}
	}
	refJSON, err := json.Marshal(ref)
	if err != nil {
		return 0, nil, fmt.Errorf("encode object reference: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   nsName,
		Labels: map[string]string{LabelManagedBy: ManagedByBroker, LabelCodeInstance: nsName},
		Annotations: map[string]string{
			AnnotationInstanceID: id, AnnotationServiceID: svc.ID, AnnotationPlanID: plan.ID, AnnotationRequestHash: hash,
			AnnotationObject: string(refJSON), AnnotationOwnsControlPlane: fmt.Sprint(owns),
		},
	}}
	if err := c.onboarding.Create(ctx, ns); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return 0, nil, concurrencyError("Another request for instance %s is in progress; try again.", truncate(id, 100))
		}
		return 0, nil, fmt.Errorf("create namespace %s: %w", nsName, err)
	}
	created := &record{ns: ns, id: id, object: ref}
	if err := c.createObjects(ctx, id, nsName, owns, mcpKey, ref, spec, created); err != nil {
		// Leave nothing behind: the platform may send the request again.
		if created.object.UID != "" {
			if derr := c.deleteObject(ctx, created); derr != nil {
				c.log.Error(derr, "Cannot remove the object of a failed provision", "object", ref.String())
			}
		}
		if derr := c.onboarding.Delete(ctx, ns); derr != nil && !apierrors.IsNotFound(derr) {
			c.log.Error(derr, "Cannot remove the namespace of a failed provision", "namespace", nsName)
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return 0, nil, badRequest("The onboarding cluster refused the %s: %s", plan.Kind, apiMessage(err))
		}
		return 0, nil, err
	}
	c.log.V(1).Info("Provisioning a code-based instance", "namespace", nsName, "object", ref.String(), "ownsControlPlane", owns, "requestIdentity", x.requestID)
	return http.StatusAccepted, provisionResponse{Operation: operationProvision}, nil
}

// createObjects creates the ManagedControlPlane (when owns) and the
// provider's object of a new instance, and records the object's UID in
// rec (the record just created), in memory as soon as the object exists.
func (c *CodeOfferings) createObjects(ctx context.Context, id, nsName string, owns bool, mcpKey client.ObjectKey, ref objectRef, spec map[string]json.RawMessage, rec *record) error {
	labels := map[string]string{LabelManagedBy: ManagedByBroker, LabelCodeInstance: nsName}
	annotations := map[string]string{AnnotationInstanceID: id}
	if owns {
		mcp := &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{
			Namespace: mcpKey.Namespace, Name: mcpKey.Name, Labels: labels, Annotations: annotations}}
		if err := c.onboarding.Create(ctx, mcp); err != nil {
			return fmt.Errorf("create ManagedControlPlane %s: %w", mcpKey, err)
		}
	}
	obj := ref.new()
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	var specMap map[string]any
	if err := json.Unmarshal(specJSON, &specMap); err != nil {
		return fmt.Errorf("decode spec: %w", err)
	}
	obj.Object["spec"] = specMap
	if err := c.onboarding.Create(ctx, obj); err != nil {
		return fmt.Errorf("create %s: %w", ref, err)
	}
	return c.recordUID(ctx, rec, obj.GetUID())
}

// recordUID writes uid, the UID of the provider's object, into rec's
// namespace (AnnotationObject) and into rec. From then on only the object
// with that UID is the instance's: a tenant who deletes and re-creates an
// object of the same name next to its own control plane gets an object the
// broker neither reports on nor deletes.
func (c *CodeOfferings) recordUID(ctx context.Context, rec *record, uid types.UID) error {
	rec.object.UID = uid
	refJSON, err := json.Marshal(rec.object)
	if err != nil {
		return fmt.Errorf("encode object reference: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationObject: string(refJSON)}}})
	if err != nil {
		return fmt.Errorf("encode the record's patch: %w", err)
	}
	if err := c.onboarding.Patch(ctx, rec.ns, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("record the UID of %s in namespace %s: %w", rec.object, rec.ns.Name, err)
	}
	return nil
}

// objectOf reads the provider's object of rec; nil when it is gone. An
// object of that name with another UID than the recorded one is another
// object (its tenant deleted and re-created it): it counts as gone. A
// record without a UID (written by an earlier version, or by a provision
// interrupted right after it created the object) takes the UID of the
// object of that name that carries the instance's labels, once.
func (c *CodeOfferings) objectOf(ctx context.Context, rec *record) (*unstructured.Unstructured, error) {
	obj := rec.object.new()
	if err := c.onboarding.Get(ctx, rec.object.key(), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get %s: %w", rec.object, err)
	}
	switch {
	case rec.object.UID != "":
		if obj.GetUID() != rec.object.UID {
			return nil, nil
		}
		return obj, nil
	case obj.GetLabels()[LabelCodeInstance] != rec.ns.Name || obj.GetAnnotations()[AnnotationInstanceID] != rec.id:
		return nil, nil
	}
	if err := c.recordUID(ctx, rec, obj.GetUID()); err != nil {
		return nil, err
	}
	return obj, nil
}

// mayUse checks that instance id may serve the existing control plane ref:
// it must carry AnnotationAllowInstance with exactly this id. The answer is
// the same whether the control plane is missing or not allowed, so that
// the broker tells an OSB user nothing about other tenants' control planes.
func (c *CodeOfferings) mayUse(ctx context.Context, id string, ref controlPlaneRef) error {
	refused := badRequest("ManagedControlPlane %s/%s cannot be used by this instance: only a control plane that exists and carries the annotation %s with this instance's id can be named in %s.",
		truncate(ref.Namespace, 63), truncate(ref.Name, 63), AnnotationAllowInstance, catalog.ControlPlaneParameter)
	mcp := &corev2alpha1.ManagedControlPlane{}
	if err := c.onboarding.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, mcp); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return refused
		}
		return fmt.Errorf("get ManagedControlPlane %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if mcp.Annotations[AnnotationAllowInstance] != id || mcp.DeletionTimestamp != nil {
		return refused
	}
	return nil
}

// provisionAgain answers a provision for an instance that exists: the
// same request is answered as the first one (200 once it is Ready, 202
// before), another one is 409. After an update, the same request is one
// with the instance's updated attributes (recordHash, canonical): the
// hash of the first provision is replaced.
func (c *CodeOfferings) provisionAgain(ctx context.Context, rec *record, hash, canonical string) (int, any, error) {
	if rec.ns.DeletionTimestamp != nil {
		return 0, nil, concurrencyError("Instance %s is being deleted.", truncate(rec.id, 100))
	}
	if rec.hash != hash && rec.hash != canonical {
		return 0, nil, conflict("Instance %s already exists with other attributes.", truncate(rec.id, 100))
	}
	st, err := c.objectState(ctx, rec)
	if err != nil {
		return 0, nil, err
	}
	if st.state == stateSucceeded {
		return http.StatusOK, emptyObject, nil
	}
	return http.StatusAccepted, provisionResponse{Operation: operationProvision}, nil
}

// objectStatus is the part of a provider's object status the broker reads.
type objectStatus struct {
	Status struct {
		Conditions         []metav1.Condition `json:"conditions"`
		ObservedGeneration int64              `json:"observedGeneration"`
		Phase              string             `json:"phase"`
	} `json:"status"`
}

// objectState reads the provider's object of rec (objectOf): gone,
// deleting, or its Ready condition as an OSB state.
func (c *CodeOfferings) objectState(ctx context.Context, rec *record) (codeOperationState, error) {
	obj, err := c.objectOf(ctx, rec)
	if err != nil {
		return codeOperationState{}, err
	}
	return c.stateOf(ctx, rec, obj)
}

// stateOf is objectState of obj, the provider's object of rec as objectOf
// read it (nil when gone). Ready counts only when it reports on the
// object's current generation, so that an update is in progress until the
// provider reconciled the new spec.
func (c *CodeOfferings) stateOf(ctx context.Context, rec *record, obj *unstructured.Unstructured) (codeOperationState, error) {
	if obj == nil {
		return codeOperationState{state: "gone"}, nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return codeOperationState{state: "deleting", Description: fmt.Sprintf("Waiting for the %s to be deleted.", rec.object.Kind)}, nil
	}
	var st objectStatus
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &st); err != nil {
		return codeOperationState{}, fmt.Errorf("read the status of %s: %w", rec.object, err)
	}
	ready := apimeta.FindStatusCondition(st.Status.Conditions, string(common.ConditionTypeReady))
	current := ready != nil && (ready.ObservedGeneration == 0 || ready.ObservedGeneration == obj.GetGeneration())
	switch {
	case current && ready.Status == metav1.ConditionTrue:
		return codeOperationState{state: stateSucceeded}, nil
	case current && terminal(st, ready):
		// The provider runtime reports a control plane that is not there
		// yet as invalid input too; only once the control plane is Ready
		// is the provider's verdict final.
		mcpReady, err := c.controlPlaneReady(ctx, rec)
		if err != nil {
			return codeOperationState{}, err
		}
		if !mcpReady {
			return codeOperationState{state: stateInProgress, Description: "Waiting for the ManagedControlPlane to be Ready."}, nil
		}
		return codeOperationState{state: stateFailed, Description: fmt.Sprintf("%s: %s", ready.Reason, ready.Message)}, nil
	case ready != nil && ready.Message != "":
		return codeOperationState{state: stateInProgress, Description: ready.Message}, nil
	}
	return codeOperationState{state: stateInProgress, Description: fmt.Sprintf("Waiting for the %s to be Ready.", rec.object.Kind)}, nil
}

// controlPlaneReady reports whether the ManagedControlPlane of rec is
// Ready.
func (c *CodeOfferings) controlPlaneReady(ctx context.Context, rec *record) (bool, error) {
	mcp := &corev2alpha1.ManagedControlPlane{}
	if err := c.onboarding.Get(ctx, rec.object.key(), mcp); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get ManagedControlPlane %s: %w", rec.object.key(), err)
	}
	return apimeta.IsStatusConditionTrue(mcp.Status.Conditions, string(common.ConditionTypeReady)), nil
}

// terminal reports whether the provider gave up on the object until its
// spec changes: the provider runtime's mark of invalid user input (phase
// Failed, Ready and Synced False with the same reason). Any other False is
// a condition the provider retries, so the operation is still in progress.
// So is MCPNotFound, which the runtime reports as invalid input too: the
// broker created or checked the control plane, and the provider tries again
// when its ClusterRequest appears.
func terminal(st objectStatus, ready *metav1.Condition) bool {
	synced := apimeta.FindStatusCondition(st.Status.Conditions, conditionSynced)
	return st.Status.Phase == string(common.PhaseFailed) && ready.Status == metav1.ConditionFalse &&
		synced != nil && synced.Status == metav1.ConditionFalse && synced.Reason == ready.Reason &&
		ready.Reason != clusteraccess.ReasonMCPNotFound
}

// codeOperationState is the body of a last_operation answer; state is
// also "gone" or "deleting" internally.
type codeOperationState struct {
	state       string
	State       string `json:"state"`
	Description string `json:"description,omitempty"`
}

// lastOperation answers the poll of a provision, update or deprovision.
// A provision and an update follow the Ready condition of the provider's
// object for its current generation (stateOf). A deprovision advances
// here, one step per poll, so that a broker restart loses nothing: the
// provider's object is deleted first (its provider
// cleans up in the control plane), then the ManagedControlPlane the broker
// created, then the namespace; once the namespace is gone the poll is 410,
// which OSB defines as success for a deletion.
func (c *CodeOfferings) lastOperation(x *exchange, r *http.Request) (int, any, error) {
	call, err := parseCall(x, r, 0)
	if err != nil {
		return 0, nil, err
	}
	ctx, id, q := call.ctx, call.instanceID, call.query
	op := q.operationV.value
	if q.operationV.present && op != operationProvision && op != operationDeprovision && op != operationUpdate {
		return 0, nil, badRequest("operation %q is not an operation of this instance.", truncate(op, 100))
	}
	rec, err := c.getRecord(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if rec == nil {
		if op == operationDeprovision {
			return http.StatusGone, emptyObject, nil
		}
		return 0, nil, notFound("Instance %s does not exist.", truncate(id, 100))
	}
	answer := func(l codeOperationState) (int, any, error) {
		l.State = l.state
		return http.StatusOK, l, nil
	}
	if rec.ns.DeletionTimestamp != nil {
		return answer(codeOperationState{state: stateInProgress, Description: "Deleting the instance's namespace."})
	}
	st, err := c.objectState(ctx, rec)
	if err != nil {
		return 0, nil, err
	}
	deleting := op == operationDeprovision || st.state == "gone" || st.state == "deleting"
	if !deleting {
		return answer(st)
	}
	switch st.state {
	case "deleting":
		return answer(codeOperationState{state: stateInProgress, Description: st.Description})
	case "gone":
	default:
		// A deprovision polled before its delete call was recorded, or
		// after a restart: delete again (idempotent).
		if err := c.deleteObject(ctx, rec); err != nil {
			return 0, nil, err
		}
		return answer(codeOperationState{state: stateInProgress, Description: fmt.Sprintf("Waiting for the %s to be deleted.", rec.object.Kind)})
	}
	if rec.ownsMCP {
		mcp := &corev2alpha1.ManagedControlPlane{}
		key := rec.object.key()
		err := c.onboarding.Get(ctx, key, mcp)
		switch {
		case err == nil:
			if mcp.DeletionTimestamp == nil {
				if err := c.onboarding.Delete(ctx, mcp); err != nil && !apierrors.IsNotFound(err) {
					return 0, nil, fmt.Errorf("delete ManagedControlPlane %s: %w", key, err)
				}
			}
			return answer(codeOperationState{state: stateInProgress, Description: "Deleting the ManagedControlPlane."})
		case !apierrors.IsNotFound(err):
			return 0, nil, fmt.Errorf("get ManagedControlPlane %s: %w", key, err)
		}
	}
	if err := c.onboarding.Delete(ctx, rec.ns); err != nil && !apierrors.IsNotFound(err) {
		return 0, nil, fmt.Errorf("delete namespace %s: %w", rec.ns.Name, err)
	}
	return answer(codeOperationState{state: stateInProgress, Description: "Deleting the instance's namespace."})
}

// deleteObject starts the deletion of the provider's object of rec
// (objectOf), with its UID as precondition: an object of the same name
// that is not the instance's is never deleted.
func (c *CodeOfferings) deleteObject(ctx context.Context, rec *record) error {
	obj, err := c.objectOf(ctx, rec)
	if err != nil || obj == nil {
		return err
	}
	uid := obj.GetUID()
	err = c.onboarding.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s: %w", rec.object, err)
	}
	return nil
}

// deprovision deletes the instance's bindings (their AccessRequests) and
// the provider's object, and answers 202: the rest follows the polls of
// last_operation.
func (c *CodeOfferings) deprovision(x *exchange, r *http.Request) (int, any, error) {
	call, err := parseCall(x, r, parseDelete|parseAsync)
	if err != nil {
		return 0, nil, err
	}
	ctx, id, serviceID, incomplete := call.ctx, call.instanceID, call.serviceID, call.async
	rec, err := c.getRecord(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if rec == nil {
		return http.StatusGone, emptyObject, nil
	}
	if serviceID != rec.serviceID {
		return 0, nil, badRequest("service_id %q is not the service offering of the instance.", truncate(serviceID, 100))
	}
	if !incomplete {
		return 0, nil, asyncRequired("service plan")
	}
	if err := c.deleteBindings(ctx, rec); err != nil {
		return 0, nil, err
	}
	if err := c.deleteObject(ctx, rec); err != nil {
		return 0, nil, err
	}
	c.log.V(1).Info("Deprovisioning a code-based instance", "namespace", rec.ns.Name, "requestIdentity", x.requestID)
	return http.StatusAccepted, operationResponse{Operation: operationDeprovision}, nil
}

// notSupported answers the endpoints code-based offerings do not serve:
// bindings are synchronous, so there is no binding last_operation.
func (c *CodeOfferings) notSupported(what string) endpointFunc {
	return func(*exchange, *http.Request) (int, any, error) {
		return 0, nil, badRequest("Code-based offerings do not support %s.", what)
	}
}
