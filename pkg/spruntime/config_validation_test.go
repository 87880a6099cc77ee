package spruntime_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/internal/crdtest"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/spruntime/internal/testapi"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// badPollInterval is a spec.pollInterval that is not a duration.
const badPollInterval = "often"

// badConfig is a ProviderConfig with spec.pollInterval badPollInterval,
// built unstructured (as kubectl sends it) so that the test's own decoding
// does not depend on the type under test.
func badConfig(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"pollInterval": badPollInterval}}}
	u.SetGroupVersionKind(testapi.GroupVersion.WithKind("ProviderConfig"))
	u.SetName(name)
	return u
}

// TestInvalidProviderConfig is issue #10 item 3 for the runtime: a
// ProviderConfig whose spec.pollInterval is not a duration is refused by
// the API server; one stored before that rule existed no longer makes the
// platform cache fail to list every ProviderConfig. Another provider's bad
// ProviderConfig does not stop this one, and objects of the provider whose
// own ProviderConfig is bad get Ready=False/InvalidProviderConfig, without
// retries, until it is fixed.
func TestInvalidProviderConfig(t *testing.T) {
	testenv.SkipIfShort(t)
	if platform == nil {
		t.Fatal(errMissingTestEnvironment)
	}
	ctx := context.Background()
	err := platformC.Create(ctx, badConfig("refused"), client.DryRunAll)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.pollInterval") || !strings.Contains(err.Error(), "must be a non-negative duration") {
		t.Fatalf("create with spec.pollInterval %q: %v; want 422 naming spec.pollInterval with the rule's message", badPollInterval, err)
	}

	restore := crdtest.DropValidations(t, platform.Config, "providerconfigs.test.services.openmcp.cloud", []string{"spec", "pollInterval"},
		func(ctx context.Context) error {
			return platformC.Create(ctx, badConfig("probe"), client.DryRunAll)
		})
	// Another provider's ProviderConfig, bad and stored before any
	// provider of this test starts: its cache's first list holds it.
	other := badConfig("someone-else")
	if err := platformC.Create(ctx, other); err != nil {
		t.Fatalf("create the other provider's ProviderConfig: %v", err)
	}
	t.Cleanup(func() {
		if err := platformC.Delete(context.Background(), other); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete ProviderConfig %s: %v", other.GetName(), err)
		}
	})

	good := startProvider(t)
	good.createConfig(t, testapi.ProviderConfigSpec{})
	good.createService(t, "svc", "one")
	good.waitReady(t, "svc")

	bad := startProvider(t)
	cfg := badConfig(bad.name)
	if err := platformC.Create(ctx, cfg); err != nil {
		t.Fatalf("create ProviderConfig %s: %v", bad.name, err)
	}
	t.Cleanup(func() {
		if err := platformC.Delete(context.Background(), cfg); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete ProviderConfig %s: %v", bad.name, err)
		}
	})
	// An upgrade: today's CRD, with the rule, is installed over both.
	restore()
	bad.createService(t, "svc", "one")
	var obj *testapi.TestService
	waitFor(t, "Ready=False/InvalidProviderConfig", func() bool {
		obj = bad.get(t, "svc")
		return hasCond(obj, spruntime.ConditionReady, metav1.ConditionFalse, spruntime.ReasonInvalidProviderConfig) &&
			hasCond(obj, spruntime.ConditionSynced, metav1.ConditionFalse, spruntime.ReasonInvalidProviderConfig)
	})
	if msg := cond(obj, spruntime.ConditionReady).Message; !strings.Contains(msg, "spec.pollInterval") || !strings.Contains(msg, `"often"`) {
		t.Errorf("Ready message %q; want it to name spec.pollInterval and its value", msg)
	}
	if obj.Status.Phase != string(spruntime.PhaseFailed) {
		t.Errorf("phase = %q, want Failed", obj.Status.Phase)
	}
	if bad.managed(t, "svc") != nil {
		t.Errorf("the service was created under an invalid ProviderConfig")
	}
	n := bad.settledReconciles(t)
	stays(t, "no retries while the ProviderConfig is invalid", func() bool { return bad.reconciles(t) <= n+1 })

	// Fixing the ProviderConfig reconciles the object at once.
	if err := platformC.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(cfg.Object, "1m", "spec", "pollInterval"); err != nil {
		t.Fatal(err)
	}
	if err := platformC.Update(ctx, cfg); err != nil {
		t.Fatalf("fix ProviderConfig %s: %v", bad.name, err)
	}
	bad.waitReady(t, "svc")
}
