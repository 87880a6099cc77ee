package interoperator_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/crdtest"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

const providerConfigCRD = "providerconfigs.interoperator.services.openmcp.cloud"

// The runtime checks the inter-operator's ProviderConfig only if it is a
// ConfigValidator.
var _ spruntime.ConfigValidator = &interoperatorv1alpha1.ProviderConfig{}

// badDurations are, per duration field of the inter-operator's
// ProviderConfig, a value that is not a duration (issue #10 item 3).
var badDurations = map[string][]string{
	"often": {"spec", "pollInterval"},
	"soon":  {"spec", "limits", "renderTimeout"},
}

// rawProviderConfig is a ProviderConfig with the bad durations, built
// unstructured (as kubectl sends it) so that the test's own decoding does
// not depend on the type under test.
func rawProviderConfig(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(interoperatorv1alpha1.GroupVersion.WithKind("ProviderConfig"))
	u.SetName(name)
	for value, path := range badDurations {
		_ = unstructured.SetNestedField(u.Object, value, path...)
	}
	return u
}

// TestInvalidProviderConfigDurations: the API server refuses each bad
// duration of the ProviderConfig; one stored before the rules existed
// neither stops another inter-operator on the same platform cluster (whose
// cache lists every ProviderConfig) nor is used: the instances it
// configures get Ready=False/InvalidProviderConfig naming both fields, and
// are provisioned once it is fixed.
func TestInvalidProviderConfigDurations(t *testing.T) {
	needsClusters(t)
	ctx := context.Background()
	for value, path := range badDurations {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetGroupVersionKind(interoperatorv1alpha1.GroupVersion.WithKind("ProviderConfig"))
		u.SetName("refused")
		must(t, unstructured.SetNestedField(u.Object, value, path...))
		err := platform.Client.Create(ctx, u, client.DryRunAll)
		field := strings.Join(path, ".")
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "must be a non-negative duration") {
			t.Errorf("create with %s %q: %v; want 422 naming %s with the rule's message", field, value, err, field)
		}
	}
	if t.Failed() {
		return
	}

	var restores []func()
	for value, path := range badDurations {
		probe := &unstructured.Unstructured{Object: map[string]any{}}
		probe.SetGroupVersionKind(interoperatorv1alpha1.GroupVersion.WithKind("ProviderConfig"))
		probe.SetName("probe")
		must(t, unstructured.SetNestedField(probe.Object, value, path...))
		restores = append(restores, crdtest.DropValidations(t, platform.Config, providerConfigCRD, path,
			func(ctx context.Context) error {
				return platform.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			}))
	}
	// Another inter-operator's ProviderConfig, bad and stored before the
	// inter-operators of this test start: their caches' first list holds it.
	other := rawProviderConfig("someone-else")
	must(t, platform.Client.Create(ctx, other))
	t.Cleanup(func() {
		if err := platform.Client.Delete(context.Background(), other); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete ProviderConfig %s: %v", other.GetName(), err)
		}
	})

	good := newEnv(t, envOptions{})
	good.createService(t, "svc")
	good.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("good"))})
	good.createInstance(t, "inst", "svc", "plan", nil)
	good.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)

	bad := newEnv(t, envOptions{})
	patch := rawProviderConfig(bad.name).Object
	delete(patch, "metadata")
	delete(patch, "apiVersion")
	delete(patch, "kind")
	cfg := &interoperatorv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: bad.name}}
	must(t, platform.Client.Patch(ctx, cfg, client.RawPatch(types.MergePatchType, []byte(mustJSON(t, patch)))))
	// An upgrade: today's CRD, with the rules, is installed over both.
	for _, restore := range restores {
		restore()
	}
	bad.createService(t, "svc")
	bad.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("bad"))})
	bad.createInstance(t, "inst", "svc", "plan", nil)
	var c *metav1.Condition
	waitFor(t, "Ready=False/InvalidProviderConfig", func() bool {
		c = readyCondition(bad.instance(t, "inst").Status.Conditions)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == spruntime.ReasonInvalidProviderConfig
	})
	for value, path := range badDurations {
		if field := strings.Join(path, "."); !strings.Contains(c.Message, field) || !strings.Contains(c.Message, `"`+value+`"`) {
			t.Errorf("Ready message %q; want it to name %s and its value", c.Message, field)
		}
	}

	// Fixed, the ProviderConfig reconciles the instance at once.
	must(t, platform.Client.Patch(ctx, cfg, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"pollInterval":"1m","limits":{"renderTimeout":"5s"}}}`))))
	bad.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
}
