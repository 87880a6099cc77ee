package render

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

const (
	testInstanceName = "0a1b2c3d-instance"
	testNamespace    = "sf-0a1b2c3d-instance"
	testBindingName  = "9f8e7d6c-binding"
)

func raw(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

func testService() *osbv1alpha1.SFService {
	return &osbv1alpha1.SFService{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-id", Namespace: "interoperator"},
		Spec:       osbv1alpha1.SFServiceSpec{Name: "postgresql", ID: "svc-id", Description: "Postgres", Bindable: true},
	}
}

func testPlan() *osbv1alpha1.SFPlan {
	return &osbv1alpha1.SFPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "plan-id", Namespace: "interoperator"},
		Spec: osbv1alpha1.SFPlanSpec{
			Name: "small", ID: "plan-id", ServiceID: "svc-id", Description: "small",
			Context: raw(`{"x":"from-plan","size":"10Gi","replicas":3,"operator":{"image":"blueprint"}}`),
		},
	}
}

func testInstance() *osbv1alpha1.SFServiceInstance {
	return &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: testInstanceName, Namespace: testNamespace,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "broker"}},
		},
		Spec: osbv1alpha1.SFServiceInstanceSpec{
			InstanceID: testInstanceName, ServiceID: "svc-id", PlanID: "plan-id",
			OrganizationGUID: "org-guid", SpaceGUID: "space-guid",
			Parameters: raw(`{"foo":"bar"}`),
		},
	}
}

func testBinding() *osbv1alpha1.SFServiceBinding {
	return &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: testBindingName, Namespace: testNamespace},
		Spec:       osbv1alpha1.SFServiceBindingSpec{ID: testBindingName, InstanceID: testInstanceName, PlanID: "plan-id", ServiceID: "svc-id"},
	}
}

// provisionValues are the variables of a provision template.
func provisionValues(t testing.TB) map[string]any {
	t.Helper()
	v, err := Values(testService(), testPlan(), testInstance(), (*osbv1alpha1.SFServiceBinding)(nil))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// bindValues are the variables of a bind template.
func bindValues(t testing.TB) map[string]any {
	t.Helper()
	v, err := Values(testService(), testPlan(), testInstance(), testBinding())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func gotemplate(action osbv1alpha1.TemplateAction, content string) osbv1alpha1.TemplateSpec {
	return osbv1alpha1.TemplateSpec{Action: action, Type: osbv1alpha1.TypeGoTemplate, Content: content}
}
