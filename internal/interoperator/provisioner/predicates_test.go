package provisioner

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
)

// TestClusterChanged checks which SFCluster events wake the instances: a
// deletion must, whether it shows as a delete event or, with a finalizer,
// first as an update that sets deletionTimestamp, so that instances waiting
// for a cluster find the one left.
func TestClusterChanged(t *testing.T) {
	sfc := func(generation int64, deleting bool, ready string) *resourcev1alpha1.SFCluster {
		c := &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "catalog", Name: "a", Generation: generation}}
		if deleting {
			now := metav1.Now()
			c.DeletionTimestamp = &now
			c.Finalizers = []string{"test"}
		}
		c.Annotations = map[string]string{"status": ready}
		return c
	}
	p := clusterChanged()
	if !p.Create(event.TypedCreateEvent[*resourcev1alpha1.SFCluster]{Object: sfc(1, false, "")}) {
		t.Error("a new SFCluster must wake the instances: it may be the one they wait for")
	}
	if !p.Delete(event.TypedDeleteEvent[*resourcev1alpha1.SFCluster]{Object: sfc(1, false, "")}) {
		t.Error("a deleted SFCluster must wake the instances: the one left may take them")
	}
	updates := map[string]struct {
		reason   string
		old, new *resourcev1alpha1.SFCluster
		want     bool
	}{
		"SpecChanged":       {"A new generation may change where instances go.", sfc(1, false, ""), sfc(2, false, ""), true},
		"DeletionStarted":   {"A deletion that a finalizer holds shows as an update setting deletionTimestamp.", sfc(1, false, ""), sfc(1, true, ""), true},
		"MetadataOnly":      {"Other metadata changes (annotations, status) do not wake every instance.", sfc(1, false, "a"), sfc(1, false, "b"), false},
		"StillBeingDeleted": {"Further updates of a cluster being deleted do not either.", sfc(1, true, "a"), sfc(1, true, "b"), false},
	}
	for name, tc := range updates {
		t.Run(name, func(t *testing.T) {
			if got := p.Update(event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("%s\nUpdate = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// TestCatalogWakes checks which SFPlan and SFService events wake the
// instances: a plan the catalog controller turns valid or invalid (a
// status change), and a service that appears or takes a new id, which an
// instance may have looked for before the catalog's watches brought it.
func TestCatalogWakes(t *testing.T) {
	plan := func(generation int64, ready metav1.ConditionStatus, observed int64) *osbv1alpha1.SFPlan {
		p := &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: "catalog", Name: "p", Generation: generation}}
		if ready != "" {
			p.Status.Conditions = []metav1.Condition{{Type: catalog.ConditionReady, Status: ready, ObservedGeneration: observed}}
		}
		return p
	}
	plans := map[string]struct {
		reason   string
		old, new *osbv1alpha1.SFPlan
		want     bool
	}{
		"TurnedValid":   {"Instances that found the plan invalid wait for the verdict to change.", plan(1, metav1.ConditionFalse, 1), plan(1, metav1.ConditionTrue, 1), true},
		"TurnedInvalid": {"Instances read the verdict: a plan that turns invalid concerns them.", plan(1, "", 0), plan(1, metav1.ConditionFalse, 1), true},
		"SpecChanged":   {"A new generation may change what the instances render.", plan(1, metav1.ConditionTrue, 1), plan(2, metav1.ConditionTrue, 1), true},
		"StillValid":    {"A status write that keeps the verdict wakes no instance.", plan(1, metav1.ConditionTrue, 1), plan(1, metav1.ConditionTrue, 1), false},
		"StaleVerdict":  {"A False verdict for an older generation does not keep instances waiting.", plan(2, metav1.ConditionFalse, 1), plan(2, metav1.ConditionTrue, 1), false},
	}
	p := planChanged()
	for name, tc := range plans {
		t.Run("Plan"+name, func(t *testing.T) {
			if got := p.Update(event.TypedUpdateEvent[*osbv1alpha1.SFPlan]{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("%s\nUpdate = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}

	svc := func(id, description string) *osbv1alpha1.SFService {
		return &osbv1alpha1.SFService{ObjectMeta: metav1.ObjectMeta{Namespace: "catalog", Name: "s"},
			Spec: osbv1alpha1.SFServiceSpec{ID: id, Description: description}}
	}
	s := serviceAppeared()
	if !s.Create(event.TypedCreateEvent[*osbv1alpha1.SFService]{Object: svc("a", "")}) {
		t.Error("a new SFService must wake the instances of its id: they may have waited for it")
	}
	if !s.Update(event.TypedUpdateEvent[*osbv1alpha1.SFService]{ObjectOld: svc("a", ""), ObjectNew: svc("b", "")}) {
		t.Error("an SFService that takes a new id appears for the instances of that id")
	}
	if s.Update(event.TypedUpdateEvent[*osbv1alpha1.SFService]{ObjectOld: svc("a", "x"), ObjectNew: svc("a", "y")}) {
		t.Error("a new description must not wake every instance of the service")
	}
}
