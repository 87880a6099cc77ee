package code

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
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
)

// What the broker records for an instance of a code-based offering (with
// sf.LabelManagedBy and sf.AnnotationInstanceID, as on SF namespaces). The
// record is the instance's namespace on the onboarding cluster,
// osb-<name>, created with these labels and annotations; only the UID of
// the provider's object is added once the object exists. The state of the
// instance is read from the objects themselves (the provider's object, the
// ManagedControlPlane, the AccessRequests), so a broker restart loses
// nothing.
const (
	// NamespacePrefix starts the namespace of every instance of a
	// code-based offering: osb-<sf.ObjectName(instance id)>.
	NamespacePrefix = "osb-"
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

// IsOperation reports whether op is an operation of a code-based instance,
// as last_operation polls name it.
func IsOperation(op string) bool {
	return op == operationProvision || op == operationDeprovision || op == operationUpdate
}

// Offerings serves the OSB endpoints for instances of code-based
// offerings (ServiceProviders that opted in, catalog.BuildCode):
// provisioning creates the provider's object for a ManagedControlPlane,
// binding an AccessRequest for that control plane with the offering's
// rules.
type Offerings struct {
	catalog    osb.Catalog
	onboarding client.Client
	platform   client.Client
	// accessNamespace is the broker's namespace on the platform cluster,
	// where the AccessRequests of bindings and their kubeconfig Secrets
	// live.
	accessNamespace string
	// sfStore reads SFServiceInstances, so that an id is never used by both
	// backends; nil skips the check.
	sfStore      sf.Store
	log          logr.Logger
	pollInterval time.Duration
	bindTimeout  time.Duration
}

var _ osb.Backend = &Offerings{}

// Option configures Offerings.
type Option func(*Offerings)

// WithLogger sets the logger.
func WithLogger(l logr.Logger) Option { return func(c *Offerings) { c.log = l } }

// WithSFStore lets provisioning refuse an instance id that an
// SFServiceInstance already uses.
func WithSFStore(s sf.Store) Option { return func(c *Offerings) { c.sfStore = s } }

// WithBindTimeout bounds how long a bind waits for its AccessRequest to be
// granted and an unbind for it to be revoked (default sf.DefaultSyncTimeout).
func WithBindTimeout(d time.Duration) Option { return func(c *Offerings) { c.bindTimeout = d } }

// New returns the backend of code-based offerings. cat must
// be the catalog whose snapshots carry the code-based offerings
// (catalog.Merge, MergedCatalog); onboarding writes namespaces,
// ManagedControlPlanes and the providers' objects; platform writes
// AccessRequests and reads their Secrets in accessNamespace.
func New(cat osb.Catalog, onboarding, platform client.Client, accessNamespace string, opts ...Option) (*Offerings, error) {
	if cat == nil || onboarding == nil || platform == nil || accessNamespace == "" {
		return nil, errors.New("code-based offerings: a catalog, both clusters and an access namespace are required")
	}
	c := &Offerings{catalog: cat, onboarding: onboarding, platform: platform, accessNamespace: accessNamespace,
		log: logr.Discard(), pollInterval: 100 * time.Millisecond, bindTimeout: sf.DefaultSyncTimeout}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Namespace returns the namespace that records the code-based instance
// instanceID.
func Namespace(instanceID string) string { return NamespacePrefix + sf.ObjectName(instanceID) }

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
func (c *Offerings) getRecord(ctx context.Context, id string) (*record, error) {
	ns := &corev1.Namespace{}
	if err := c.onboarding.Get(ctx, client.ObjectKey{Name: Namespace(id)}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get namespace %s: %w", Namespace(id), err)
	}
	a := ns.Annotations
	if !sf.OwnsNamespace(ns, id) {
		return nil, osb.Conflict("The namespace %s of this instance exists and does not belong to it; choose another instance id.", ns.Name)
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
func (c *Offerings) existingRecord(ctx context.Context, id string) (*record, error) {
	rec, err := c.getRecord(ctx, id)
	if err == nil && rec == nil {
		err = osb.NotFound("Instance %s does not exist.", osb.Truncate(id, 100))
	}
	return rec, err
}

// Owns reports whether instance id is a code-based instance.
func (c *Offerings) Owns(ctx context.Context, id string) (bool, error) {
	ns := &corev1.Namespace{}
	err := c.onboarding.Get(ctx, client.ObjectKey{Name: Namespace(id)}, ns)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get namespace %s: %w", Namespace(id), err)
	}
	return ns.Labels[sf.LabelManagedBy] == sf.ManagedByBroker && ns.Annotations[sf.AnnotationInstanceID] != "", nil
}

// Serves reports whether serviceID is a code-based offering of the catalog.
func (c *Offerings) Serves(serviceID string) bool {
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

// Provision creates the instance: its namespace (the record), the
// ManagedControlPlane unless the parameters name one the instance may use,
// and the provider's object with the parameters as spec. It answers 202;
// last_operation follows the object's Ready condition.
func (c *Offerings) Provision(ctx context.Context, x *osb.Call, req *osb.ProvisionRequest) (int, any, error) {
	params, err := provisionParameters(x, req)
	if err != nil {
		return 0, nil, err
	}
	hash := requestHash(req.ServiceID, req.PlanID, params)
	rec, err := c.getRecord(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	if rec != nil {
		return c.provisionAgain(ctx, rec, hash, canonicalRequestHash(req.ServiceID, req.PlanID, req.Parameters))
	}
	svc, plan, err := c.validatePlan(req, x.AcceptsIncomplete)
	if err != nil {
		return 0, nil, err
	}
	if err := c.checkIDFree(ctx, req.InstanceID); err != nil {
		return 0, nil, err
	}
	t, err := c.resolveControlPlane(ctx, req.InstanceID, plan, params)
	if err != nil {
		return 0, nil, err
	}
	if err := c.createInstance(ctx, req.InstanceID, svc.ID, plan, hash, t); err != nil {
		return 0, nil, err
	}
	c.log.V(1).Info("Provisioning a code-based instance", "namespace", Namespace(req.InstanceID), "object", t.ref.String(),
		"ownsControlPlane", t.owns, "requestIdentity", x.RequestID)
	return http.StatusAccepted, osb.ProvisionResponse{Operation: operationProvision}, nil
}

// provisionParameters checks a provision request against itself and
// returns its parameters.
func provisionParameters(x *osb.Call, req *osb.ProvisionRequest) (map[string]json.RawMessage, error) {
	if err := osb.CheckPlatform(x.Identity, req.Context); err != nil {
		return nil, err
	}
	if req.ServiceID == "" || req.PlanID == "" {
		return nil, osb.BadRequest("service_id and plan_id are required.")
	}
	params := map[string]json.RawMessage{}
	if len(req.Parameters) > 0 && string(req.Parameters) != "null" {
		if err := json.Unmarshal(req.Parameters, &params); err != nil {
			return nil, osb.BadRequest("parameters must be a JSON object.")
		}
	}
	return params, nil
}

// validatePlan checks a provision of a new instance against the catalog:
// its offering and plan, accepts_incomplete and the plan's schema.
func (c *Offerings) validatePlan(req *osb.ProvisionRequest, incomplete bool) (*catalog.CodeService, *catalog.CodePlan, error) {
	code := c.catalog.Snapshot().Code()
	svc := code.Service(req.ServiceID)
	if svc == nil {
		return nil, nil, osb.BadRequest("service_id %q is not a service offering of this broker's catalog.", osb.Truncate(req.ServiceID, 100))
	}
	plan := code.Plan(req.PlanID)
	if plan == nil || plan.ServiceID != svc.ID {
		return nil, nil, osb.BadRequest("plan_id %q is not a plan of service offering %s.", osb.Truncate(req.PlanID, 100), svc.Name)
	}
	if !incomplete {
		return nil, nil, osb.AsyncRequired("service plan")
	}
	raw := req.Parameters
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := plan.CreateSchema.Validate(raw); err != nil {
		return nil, nil, osb.BadRequest("The parameters do not match the schema of plan %s (the spec of %s): %v.", plan.Name, plan.Kind, err)
	}
	return svc, plan, nil
}

// checkIDFree refuses an instance id that an SFServiceInstance uses. An
// SFServiceInstance counts only in a namespace the broker made for it: a
// tenant's namespace of that name blocks nothing.
func (c *Offerings) checkIDFree(ctx context.Context, id string) error {
	if c.sfStore == nil {
		return nil
	}
	_, err := sf.OwnedInstance(ctx, c.sfStore, id, sf.Fresh)
	switch {
	case err == nil:
		return osb.Conflict("Instance %s already exists (a Service Fabrik instance).", osb.Truncate(id, 100))
	case !apierrors.IsNotFound(err):
		return err
	}
	return nil
}

// target is where a new instance's objects go: the provider's object ref
// with spec in the control plane mcpKey, which the broker creates when
// owns is set.
type target struct {
	mcpKey client.ObjectKey
	owns   bool
	ref    objectRef
	spec   map[string]json.RawMessage
}

// resolveControlPlane decides the control plane of a new instance: a new
// one named after the instance, or the one the parameters name
// (catalog.ControlPlaneParameter) when the instance may use it and it has
// no object of the plan's kind yet.
func (c *Offerings) resolveControlPlane(ctx context.Context, id string, plan *catalog.CodePlan, params map[string]json.RawMessage) (*target, error) {
	t := &target{mcpKey: client.ObjectKey{Namespace: Namespace(id), Name: sf.ObjectName(id)}, owns: true, spec: map[string]json.RawMessage{}}
	if cpRaw, ok := params[catalog.ControlPlaneParameter]; ok {
		var ref controlPlaneRef
		if err := json.Unmarshal(cpRaw, &ref); err != nil {
			return nil, osb.BadRequest("%s must be {\"namespace\": …, \"name\": …}.", catalog.ControlPlaneParameter)
		}
		if err := c.mayUse(ctx, id, ref); err != nil {
			return nil, err
		}
		t.mcpKey, t.owns = client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, false
	}
	for k, v := range params {
		if k != catalog.ControlPlaneParameter {
			t.spec[k] = v
		}
	}
	t.ref = objectRef{APIVersion: schema.GroupVersion{Group: plan.Group, Version: plan.Version}.String(), Kind: plan.Kind,
		Namespace: t.mcpKey.Namespace, Name: t.mcpKey.Name}
	if !t.owns {
		err := c.onboarding.Get(ctx, t.ref.key(), t.ref.new())
		switch {
		case err == nil:
			return nil, osb.Conflict("ManagedControlPlane %s already has a %s; a control plane has at most one of each kind.", t.mcpKey, plan.Kind)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("get %s: %w", t.ref, err)
		}
	}
	return t, nil
}

// createInstance writes the record of a new instance, its namespace, and
// then its objects (createObjects). When they fail it removes what it
// created, so that the platform may send the request again.
func (c *Offerings) createInstance(ctx context.Context, id, serviceID string, plan *catalog.CodePlan, hash string, t *target) error {
	nsName := Namespace(id)
	refJSON, err := json.Marshal(t.ref)
	if err != nil {
		return fmt.Errorf("encode object reference: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   nsName,
		Labels: map[string]string{sf.LabelManagedBy: sf.ManagedByBroker, LabelCodeInstance: nsName},
		Annotations: map[string]string{
			sf.AnnotationInstanceID: id, AnnotationServiceID: serviceID, AnnotationPlanID: plan.ID, AnnotationRequestHash: hash,
			AnnotationObject: string(refJSON), AnnotationOwnsControlPlane: fmt.Sprint(t.owns),
		},
	}}
	if err := c.onboarding.Create(ctx, ns); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return osb.ConcurrencyError("Another request for instance %s is in progress; try again.", osb.Truncate(id, 100))
		}
		return fmt.Errorf("create namespace %s: %w", nsName, err)
	}
	created := &record{ns: ns, id: id, object: t.ref}
	err = c.createObjects(ctx, id, nsName, t.owns, t.mcpKey, t.ref, t.spec, created)
	if err == nil {
		return nil
	}
	c.undoCreate(ctx, created)
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return osb.BadRequest("The onboarding cluster refused the %s: %s", plan.Kind, osb.APIMessage(err))
	}
	return err
}

// undoCreate removes the object and the namespace of a failed provision.
func (c *Offerings) undoCreate(ctx context.Context, created *record) {
	if created.object.UID != "" {
		if derr := c.deleteObject(ctx, created); derr != nil {
			c.log.Error(derr, "Cannot remove the object of a failed provision", "object", created.object.String())
		}
	}
	if derr := c.onboarding.Delete(ctx, created.ns); derr != nil && !apierrors.IsNotFound(derr) {
		c.log.Error(derr, "Cannot remove the namespace of a failed provision", "namespace", created.ns.Name)
	}
}

// createObjects creates the ManagedControlPlane (when owns) and the
// provider's object of a new instance, and records the object's UID in
// rec (the record just created), in memory as soon as the object exists.
func (c *Offerings) createObjects(ctx context.Context, id, nsName string, owns bool, mcpKey client.ObjectKey, ref objectRef, spec map[string]json.RawMessage, rec *record) error {
	labels := map[string]string{sf.LabelManagedBy: sf.ManagedByBroker, LabelCodeInstance: nsName}
	annotations := map[string]string{sf.AnnotationInstanceID: id}
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
func (c *Offerings) recordUID(ctx context.Context, rec *record, uid types.UID) error {
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
func (c *Offerings) objectOf(ctx context.Context, rec *record) (*unstructured.Unstructured, error) {
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
	case obj.GetLabels()[LabelCodeInstance] != rec.ns.Name || obj.GetAnnotations()[sf.AnnotationInstanceID] != rec.id:
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
func (c *Offerings) mayUse(ctx context.Context, id string, ref controlPlaneRef) error {
	refused := osb.BadRequest("ManagedControlPlane %s/%s cannot be used by this instance: only a control plane that exists and carries the annotation %s with this instance's id can be named in %s.",
		osb.Truncate(ref.Namespace, 63), osb.Truncate(ref.Name, 63), AnnotationAllowInstance, catalog.ControlPlaneParameter)
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
func (c *Offerings) provisionAgain(ctx context.Context, rec *record, hash, canonical string) (int, any, error) {
	if rec.ns.DeletionTimestamp != nil {
		return 0, nil, osb.ConcurrencyError("Instance %s is being deleted.", osb.Truncate(rec.id, 100))
	}
	if rec.hash != hash && rec.hash != canonical {
		return 0, nil, osb.Conflict("Instance %s already exists with other attributes.", osb.Truncate(rec.id, 100))
	}
	st, err := c.objectState(ctx, rec)
	if err != nil {
		return 0, nil, err
	}
	if st.state == osb.StateSucceeded {
		return http.StatusOK, osb.EmptyObject, nil
	}
	return http.StatusAccepted, osb.ProvisionResponse{Operation: operationProvision}, nil
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
func (c *Offerings) objectState(ctx context.Context, rec *record) (codeOperationState, error) {
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
func (c *Offerings) stateOf(ctx context.Context, rec *record, obj *unstructured.Unstructured) (codeOperationState, error) {
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
		return codeOperationState{state: osb.StateSucceeded}, nil
	case current && terminal(st, ready):
		// The provider runtime reports a control plane that is not there
		// yet as invalid input too; only once the control plane is Ready
		// is the provider's verdict final.
		mcpReady, err := c.controlPlaneReady(ctx, rec)
		if err != nil {
			return codeOperationState{}, err
		}
		if !mcpReady {
			return codeOperationState{state: osb.StateInProgress, Description: "Waiting for the ManagedControlPlane to be Ready."}, nil
		}
		return codeOperationState{state: osb.StateFailed, Description: fmt.Sprintf("%s: %s", ready.Reason, ready.Message)}, nil
	case ready != nil && ready.Message != "":
		return codeOperationState{state: osb.StateInProgress, Description: ready.Message}, nil
	}
	return codeOperationState{state: osb.StateInProgress, Description: fmt.Sprintf("Waiting for the %s to be Ready.", rec.object.Kind)}, nil
}

// controlPlaneReady reports whether the ManagedControlPlane of rec is
// Ready.
func (c *Offerings) controlPlaneReady(ctx context.Context, rec *record) (bool, error) {
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

// InstanceLastOperation answers the poll of a provision, update or deprovision.
// A provision and an update follow the Ready condition of the provider's
// object for its current generation (stateOf). A deprovision advances
// here, one step per poll, so that a broker restart loses nothing: the
// provider's object is deleted first (its provider
// cleans up in the control plane), then the ManagedControlPlane the broker
// created, then the namespace; once the namespace is gone the poll is 410,
// which OSB defines as success for a deletion.
func (c *Offerings) InstanceLastOperation(ctx context.Context, _ *osb.Call, req *osb.LastOperationRequest) (int, any, error) {
	id, op := req.InstanceID, req.Operation
	if op != "" && !IsOperation(op) {
		return 0, nil, osb.BadRequest("operation %q is not an operation of this instance.", osb.Truncate(op, 100))
	}
	rec, err := c.getRecord(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if rec == nil {
		if op == operationDeprovision {
			return http.StatusGone, osb.EmptyObject, nil
		}
		return 0, nil, osb.NotFound("Instance %s does not exist.", osb.Truncate(id, 100))
	}
	answer := func(l codeOperationState) (int, any, error) {
		l.State = l.state
		return http.StatusOK, l, nil
	}
	if rec.ns.DeletionTimestamp != nil {
		return answer(codeOperationState{state: osb.StateInProgress, Description: "Deleting the instance's namespace."})
	}
	st, err := c.objectState(ctx, rec)
	if err != nil {
		return 0, nil, err
	}
	if op == operationDeprovision || st.state == "gone" || st.state == "deleting" {
		if st, err = c.advanceDeletion(ctx, rec, st); err != nil {
			return 0, nil, err
		}
	}
	return answer(st)
}

// advanceDeletion takes the deletion of rec one step further, st being
// the state of its provider's object: the object first, then the
// ManagedControlPlane the broker created, then the namespace. It returns
// the state to report.
func (c *Offerings) advanceDeletion(ctx context.Context, rec *record, st codeOperationState) (codeOperationState, error) {
	switch st.state {
	case "deleting":
		return codeOperationState{state: osb.StateInProgress, Description: st.Description}, nil
	case "gone":
	default:
		// A deprovision polled before its delete call was recorded, or
		// after a restart: delete again (idempotent).
		if err := c.deleteObject(ctx, rec); err != nil {
			return st, err
		}
		return codeOperationState{state: osb.StateInProgress, Description: fmt.Sprintf("Waiting for the %s to be deleted.", rec.object.Kind)}, nil
	}
	if rec.ownsMCP {
		gone, err := c.deleteControlPlane(ctx, rec.object.key())
		if err != nil {
			return st, err
		}
		if !gone {
			return codeOperationState{state: osb.StateInProgress, Description: "Deleting the ManagedControlPlane."}, nil
		}
	}
	if err := c.onboarding.Delete(ctx, rec.ns); err != nil && !apierrors.IsNotFound(err) {
		return st, fmt.Errorf("delete namespace %s: %w", rec.ns.Name, err)
	}
	return codeOperationState{state: osb.StateInProgress, Description: "Deleting the instance's namespace."}, nil
}

// deleteControlPlane starts the deletion of the ManagedControlPlane at key
// and reports whether it is gone.
func (c *Offerings) deleteControlPlane(ctx context.Context, key client.ObjectKey) (bool, error) {
	mcp := &corev2alpha1.ManagedControlPlane{}
	if err := c.onboarding.Get(ctx, key, mcp); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("get ManagedControlPlane %s: %w", key, err)
	}
	if mcp.DeletionTimestamp == nil {
		if err := c.onboarding.Delete(ctx, mcp); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete ManagedControlPlane %s: %w", key, err)
		}
	}
	return false, nil
}

// deleteObject starts the deletion of the provider's object of rec
// (objectOf), with its UID as precondition: an object of the same name
// that is not the instance's is never deleted.
func (c *Offerings) deleteObject(ctx context.Context, rec *record) error {
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

// Deprovision deletes the instance's bindings (their AccessRequests) and
// the provider's object, and answers 202: the rest follows the polls of
// last_operation.
func (c *Offerings) Deprovision(ctx context.Context, x *osb.Call, req *osb.DeleteRequest) (int, any, error) {
	id, serviceID, incomplete := req.InstanceID, req.ServiceID, x.AcceptsIncomplete
	rec, err := c.getRecord(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if rec == nil {
		return http.StatusGone, osb.EmptyObject, nil
	}
	if serviceID != rec.serviceID {
		return 0, nil, osb.BadRequest("service_id %q is not the service offering of the instance.", osb.Truncate(serviceID, 100))
	}
	if !incomplete {
		return 0, nil, osb.AsyncRequired("service plan")
	}
	if err := c.deleteBindings(ctx, rec); err != nil {
		return 0, nil, err
	}
	if err := c.deleteObject(ctx, rec); err != nil {
		return 0, nil, err
	}
	c.log.V(1).Info("Deprovisioning a code-based instance", "namespace", rec.ns.Name, "requestIdentity", x.RequestID)
	return http.StatusAccepted, osb.OperationResponse{Operation: operationDeprovision}, nil
}

// BindingLastOperation answers the poll of a binding: code-based
// bindings are synchronous, so there is none.
func (c *Offerings) BindingLastOperation(context.Context, *osb.Call, *osb.LastOperationRequest) (int, any, error) {
	return 0, nil, osb.BadRequest("Code-based offerings do not support %s.", "asynchronous bindings")
}
