package broker_test

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// The test provisioner stands in for the inter-operator's provisioner
// (internal/interoperator), which lands separately: it reacts to the objects
// the broker writes as that provisioner does, and is steered by the
// parameters of each request:
//   - hold: the operation stays "in progress" until the object carries the
//     annotation annotationRelease;
//   - fail: the operation fails;
//   - holdDelete / failDelete: the same for the deletion.
//
// Like the provider runtime it reconciles on changes of generation, labels,
// annotations and on the start of deletion, never on status changes, so
// the broker's write order is tested against the real trigger rules.
const (
	testFinalizer     = osbv1alpha1.FinalizerProvisioner
	annotationRelease = "test.marketplane.io/release"
)

type behaviour struct {
	Hold       bool `json:"hold"`
	Fail       bool `json:"fail"`
	HoldDelete bool `json:"holdDelete"`
	FailDelete bool `json:"failDelete"`
	// NoEndpoints leaves endpoints out of a bind response: the real
	// client library cannot decode the 2.17 form (TestRealClientSF).
	NoEndpoints bool `json:"noEndpoints"`
}

func behaviourOf(obj client.Object, params []byte) behaviour {
	var b behaviour
	_ = json.Unmarshal(params, &b)
	if obj.GetAnnotations()[annotationRelease] == "true" {
		b.Hold, b.HoldDelete = false, false
	}
	return b
}

// changed mirrors the provider runtime's trigger rules.
func changed() predicate.Predicate {
	return predicate.Or[client.Object](
		predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		predicate.AnnotationChangedPredicate{},
		predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
			},
		},
	)
}

// startProvisioner runs the test provisioner on the onboarding cluster.
func startProvisioner(mgr ctrl.Manager) error {
	c := mgr.GetClient()
	opts := controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4}
	if err := ctrl.NewControllerManagedBy(mgr).Named("test-instance-provisioner").WithOptions(opts).
		For(&osbv1alpha1.SFServiceInstance{}, builder.WithPredicates(changed())).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcileInstance(ctx, c, req)
		})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("test-binding-provisioner").WithOptions(opts).
		For(&osbv1alpha1.SFServiceBinding{}, builder.WithPredicates(changed())).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcileBinding(ctx, c, req)
		}))
}

func params(r interface{}) []byte {
	switch v := r.(type) {
	case *osbv1alpha1.SFServiceInstance:
		if v.Spec.Parameters != nil {
			return v.Spec.Parameters.Raw
		}
	case *osbv1alpha1.SFServiceBinding:
		if v.Spec.Parameters != nil {
			return v.Spec.Parameters.Raw
		}
	}
	return nil
}

func reconcileInstance(ctx context.Context, c client.Client, req reconcile.Request) (reconcile.Result, error) {
	inst := &osbv1alpha1.SFServiceInstance{}
	if err := c.Get(ctx, req.NamespacedName, inst); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	b := behaviourOf(inst, params(inst))
	st := inst.Status.DeepCopy()
	if inst.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(inst, testFinalizer) {
			return reconcile.Result{}, nil
		}
		switch {
		case b.HoldDelete:
			st.State = osbv1alpha1.StateInProgress
		case b.FailDelete:
			st.State, st.Error, st.InstanceUsable = osbv1alpha1.StateFailed, "deletion failed as the test asked", "true"
		default:
			controllerutil.RemoveFinalizer(inst, testFinalizer)
			return reconcile.Result{}, client.IgnoreNotFound(c.Update(ctx, inst))
		}
		st.ObservedGeneration = inst.Generation
		return reconcile.Result{}, writeStatus(ctx, c, inst, st)
	}
	if controllerutil.AddFinalizer(inst, testFinalizer) {
		if err := c.Update(ctx, inst); err != nil {
			return reconcile.Result{}, err
		}
	}
	if inst.Status.State.IsTerminal() && inst.Status.ObservedGeneration == inst.Generation {
		return reconcile.Result{}, nil
	}
	switch {
	case b.Hold:
		st.State, st.Description = osbv1alpha1.StateInProgress, "held by the test"
	case b.Fail:
		st.State, st.Error, st.Description = osbv1alpha1.StateFailed, "provisioning failed as the test asked", ""
		st.InstanceUsable, st.UpdateRepeatable = "true", "false"
	default:
		st.State, st.Description, st.Error = osbv1alpha1.StateSucceeded, "ready", ""
		st.DashboardURL = "https://dashboard.example.com/" + inst.Spec.InstanceID
	}
	st.ObservedGeneration = inst.Generation
	return reconcile.Result{}, writeStatus(ctx, c, inst, st)
}

func writeStatus(ctx context.Context, c client.Client, obj client.Object, st any) error {
	switch o := obj.(type) {
	case *osbv1alpha1.SFServiceInstance:
		o.Status = *st.(*osbv1alpha1.SFServiceInstanceStatus)
	case *osbv1alpha1.SFServiceBinding:
		o.Status = *st.(*osbv1alpha1.SFServiceBindingStatus)
	}
	return client.IgnoreNotFound(c.Status().Update(ctx, obj))
}

func reconcileBinding(ctx context.Context, c client.Client, req reconcile.Request) (reconcile.Result, error) {
	bnd := &osbv1alpha1.SFServiceBinding{}
	if err := c.Get(ctx, req.NamespacedName, bnd); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	b := behaviourOf(bnd, params(bnd))
	st := bnd.Status.DeepCopy()
	secretName := "sf-" + bnd.Name
	if bnd.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(bnd, testFinalizer) {
			return reconcile.Result{}, nil
		}
		switch {
		case b.HoldDelete:
			st.State = osbv1alpha1.StateInProgress
			st.ObservedGeneration = bnd.Generation
			return reconcile.Result{}, writeStatus(ctx, c, bnd, st)
		case b.FailDelete:
			st.State, st.Error = osbv1alpha1.StateFailed, "unbinding failed as the test asked"
			st.ObservedGeneration = bnd.Generation
			return reconcile.Result{}, writeStatus(ctx, c, bnd, st)
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: bnd.Namespace}}
		if err := c.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		controllerutil.RemoveFinalizer(bnd, testFinalizer)
		return reconcile.Result{}, client.IgnoreNotFound(c.Update(ctx, bnd))
	}
	if controllerutil.AddFinalizer(bnd, testFinalizer) {
		if err := c.Update(ctx, bnd); err != nil {
			return reconcile.Result{}, err
		}
	}
	if bnd.Status.State.IsTerminal() && bnd.Status.ObservedGeneration == bnd.Generation {
		return reconcile.Result{}, nil
	}
	switch {
	case b.Hold:
		st.State = osbv1alpha1.StateInProgress
	case b.Fail:
		st.State, st.Error = osbv1alpha1.StateFailed, "binding failed as the test asked"
	default:
		body := map[string]any{
			"credentials": map[string]string{"username": "user-" + bnd.Spec.ID, "password": "pw-" + string(bnd.UID)},
			"endpoints":   []map[string]any{{"host": "db.example.com", "ports": []string{"5432"}}},
			"secretField": "not an OSB field",
		}
		if b.NoEndpoints {
			delete(body, "endpoints")
		}
		resp, err := json.Marshal(body)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("encode the binding response: %w", err)
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: bnd.Namespace}}
		if _, err := controllerutil.CreateOrUpdate(ctx, c, sec, func() error {
			sec.Data = map[string][]byte{osbv1alpha1.BindingSecretResponseKey: resp}
			return controllerutil.SetOwnerReference(bnd, sec, c.Scheme())
		}); err != nil {
			return reconcile.Result{}, fmt.Errorf("write response Secret: %w", err)
		}
		st.State, st.Error = osbv1alpha1.StateSucceeded, ""
		st.Response = &osbv1alpha1.BindingResponse{SecretRef: secretName}
	}
	st.ObservedGeneration = bnd.Generation
	return reconcile.Result{}, writeStatus(ctx, c, bnd, st)
}
