package marketplace

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// TestWantedOfferingsNameClash: two SFServices whose namespace and name
// join to the same text (a-b/c and a/b-c) get two Offerings, the same
// two names whatever order they are listed in.
func TestWantedOfferingsNameClash(t *testing.T) {
	svc := func(ns, name, id string) osbv1alpha1.SFService {
		return osbv1alpha1.SFService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: osbv1alpha1.SFServiceSpec{Name: name, ID: id}}
	}
	plan := func(ns, id, serviceID string) osbv1alpha1.SFPlan {
		return osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id}, Spec: osbv1alpha1.SFPlanSpec{Name: id, ID: id, ServiceID: serviceID,
			Templates: []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: "x"}}}}
	}
	services := []osbv1alpha1.SFService{svc("a-b", "c", "s1"), svc("a", "b-c", "s2")}
	plans := []osbv1alpha1.SFPlan{plan("a-b", "p1", "s1"), plan("a", "p2", "s2")}
	var first []string
	for _, order := range [][]int{{0, 1}, {1, 0}} {
		src := sources{services: []osbv1alpha1.SFService{services[order[0]], services[order[1]]}, plans: plans}
		got := wantedOfferings(src)
		if len(got) != 2 {
			t.Fatalf("order %v: %d Offerings, want 2: %v", order, len(got), got)
		}
		var names []string
		for name, w := range got {
			names = append(names, name+"="+w.offering.Spec.Source.Namespace+"/"+w.offering.Spec.Source.Name)
		}
		if first == nil {
			first = names
			continue
		}
		for _, n := range names {
			found := false
			for _, f := range first {
				found = found || f == n
			}
			if !found {
				t.Errorf("order %v gives %v, order [0 1] gave %v", order, names, first)
			}
		}
	}
}
