package interoperator_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// quotaTemplate puts a tenant's parameter into a ResourceQuota, quoted as a
// careful plan author writes it: quoting keeps YAML out, but not a quantity
// that Kubernetes parses practically forever.
const quotaTemplate = `apiVersion: v1
kind: ResourceQuota
metadata:
  name: quota-{{ .instance.spec.instanceId }}
spec:
  hard:
    cpu: {{ .instance.spec.parameters.cpu | quote }}
`

// TestQuantityBombRefused is the attack of a tenant who sends a quantity
// bomb as a parameter: applied, the ResourceQuota would keep a core of the
// target cluster's API server busy for good, once for every retry. The
// render policy refuses it before anything is applied (RenderedObjectRefused
// naming the field and the rule), and an ordinary value still provisions.
func TestQuantityBombRefused(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.createService(t, "svc")
	e.createPlan(t, "quota", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, quotaTemplate)})
	bombs := map[string]string{"negative-exponent": "1E-99999999", "huge-exponent": "1e999999999", "int32-overflow": "2E6024865272343"}
	for id, cpu := range bombs {
		e.createInstance(t, id, "svc", "quota", map[string]any{"cpu": cpu})
	}
	e.createInstance(t, "ordinary", "svc", "quota", map[string]any{"cpu": "2"})

	for id := range bombs {
		t.Run(id, func(t *testing.T) {
			inst := e.waitFailed(t, id, provisioner.ReasonRenderedObjectRefused, "ResourceQuota", "spec.hard.cpu", apply.RuleBoundedQuantities)
			if len(inst.Status.Resources) != 0 {
				t.Errorf("status.resources = %+v, want none: nothing is applied", inst.Status.Resources)
			}
			absent(t, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "quota-" + id}}, "a refused render applies nothing")
		})
	}
	t.Run("ordinary", func(t *testing.T) {
		e.waitInstance(t, "ordinary", osbv1alpha1.StateSucceeded)
		q := &corev1.ResourceQuota{}
		must(t, target.Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "quota-ordinary"}, q))
		if got := q.Spec.Hard[corev1.ResourceCPU]; got.String() != "2" {
			t.Errorf("hard.cpu = %s, want 2", got.String())
		}
	})
}
