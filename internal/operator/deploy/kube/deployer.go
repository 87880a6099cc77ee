package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/marketplane/marketplane/internal/operator/deploy"
)

var _ deploy.Deployer = &Deployer{}

// Labels and annotations of the objects the deployer creates, next to the
// workload's own labels.
const (
	// ComponentLabel tells a provider's init pods from its run pods, so that
	// the run Deployment, its topology spread constraints and the metrics
	// Service select the run pods only.
	ComponentLabel = "app.kubernetes.io/component"
	// ComponentInit and ComponentRun are the values of ComponentLabel.
	ComponentInit = "init"
	ComponentRun  = "run"
	// AttemptAnnotation on the init Job counts the attempts at init for
	// the Job's generation, starting at 1.
	AttemptAnnotation = "marketplane.io/init-attempt"
	// FieldOwner is the field manager of the deployer's server-side
	// applies.
	FieldOwner = "marketplane-operator"
)

// Container names in the init and run pods.
const (
	initContainer = "init"
	runContainer  = "run"
)

// Deployer runs providers as Kubernetes Jobs and Deployments.
type Deployer struct {
	client  client.Client
	reader  client.Reader
	backoff func(failedAttempt int32) time.Duration
	now     func() time.Time
}

// Option configures a Deployer.
type Option func(*Deployer)

// WithAPIReader sets the reader for the deployer's own objects. Reading
// from the API server rather than the manager's cache means the deployer
// never acts on a stale Job; without this option the client reads.
func WithAPIReader(r client.Reader) Option {
	return func(d *Deployer) { d.reader = r }
}

// WithInitBackoff replaces deploy.InitBackoff, the wait after a failed
// init attempt before the next (for tests, which cannot wait minutes).
func WithInitBackoff(f func(failedAttempt int32) time.Duration) Option {
	return func(d *Deployer) { d.backoff = f }
}

// New returns a Deployer that creates objects on the platform cluster with
// c.
func New(c client.Client, opts ...Option) *Deployer {
	d := &Deployer{client: c, reader: c, backoff: deploy.InitBackoff, now: time.Now}
	for _, opt := range opts {
		opt(d)
	}
	return d
}

// Remove deletes the init Job (its pods go with it), the run Deployment
// and the metrics Service, and reports done once all of them are gone.
// Objects of the same names that the provider object does not own are left
// alone.
func (d *Deployer) Remove(ctx context.Context, w *deploy.Workload) (bool, error) {
	objs := []client.Object{
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.InitName}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.RunName}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: metricsServiceName(w)}},
	}
	done := true
	for _, o := range objs {
		gone, err := d.delete(ctx, w, o)
		if err != nil {
			return false, err
		}
		done = done && gone
	}
	return done, nil
}

// delete deletes o if it exists and belongs to w's provider, and reports
// whether it is gone (or not the provider's).
func (d *Deployer) delete(ctx context.Context, w *deploy.Workload, o client.Object) (gone bool, err error) {
	key := client.ObjectKeyFromObject(o)
	if err := d.reader.Get(ctx, key, o); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("get %T %s: %w", o, key, err)
	}
	if !ownedBy(o, w) {
		return true, nil
	}
	if o.GetDeletionTimestamp() == nil {
		uid := o.GetUID()
		err := d.client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return false, fmt.Errorf("delete %T %s: %w", o, key, err)
		}
	}
	if err := d.reader.Get(ctx, key, o); apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, nil
}

// ownedBy reports whether o has w's provider object as an owner.
func ownedBy(o client.Object, w *deploy.Workload) bool {
	return slices.ContainsFunc(o.GetOwnerReferences(), func(ref metav1.OwnerReference) bool {
		return ref.UID == w.Owner.UID
	})
}

// objectMeta is the metadata of an object the deployer creates for w.
func objectMeta(w *deploy.Workload, name string, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       w.Namespace,
		Labels:          podLabels(w, component),
		OwnerReferences: []metav1.OwnerReference{w.Owner},
	}
}

// podLabels are the workload's labels plus the component.
func podLabels(w *deploy.Workload, component string) map[string]string {
	l := maps.Clone(w.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[ComponentLabel] = component
	return l
}

func metricsServiceName(w *deploy.Workload) string {
	if w.Metrics.ServiceName != "" {
		return w.Metrics.ServiceName
	}
	return w.RunName + "-metrics"
}

// apply server-side applies obj, a typed object holding exactly the fields
// the deployer owns, and reads the result back into obj. Fields it set
// before and leaves out now are removed; applying an unchanged object
// writes nothing.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return fmt.Errorf("apply %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	// A typed object always serialises these; applying them would claim
	// fields the deployer does not set.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("read back %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// key returns the namespaced name of an object of w.
func key(w *deploy.Workload, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: w.Namespace, Name: name}
}
