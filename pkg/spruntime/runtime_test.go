package spruntime_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/spruntime/internal/testapi"
	"github.com/marketplane/marketplane/pkg/testenv"
)

const finalizer = "test.services.openmcp.cloud/finalizer"

func annotate(k, v string) func(*testapi.TestService) {
	return func(o *testapi.TestService) {
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		o.Annotations[k] = v
	}
}

func label(k, v string) func(*testapi.TestService) {
	return func(o *testapi.TestService) {
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[k] = v
	}
}

// TestRuntime runs the scenarios in parallel, each with its own provider
// (and ProviderConfig, namespace and controller), then checks the metrics
// they left behind.
func TestRuntime(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Run("scenarios", func(t *testing.T) {
		t.Run("GoesReadyAndFollowsSpec", testGoesReady)
		t.Run("PollWritesNothingWhenUnchanged", testPollWritesNothing)
		t.Run("ProviderConfigAndSecretChangesReconcile", testConfigChange)
		t.Run("DriftIsRepairedAndReported", testDrift)
		t.Run("DeletionBlockedByUserResources", testDeletionBlocked)
		t.Run("OrphanPolicyKeepsService", testOrphan)
		t.Run("ReleaseOverSeveralReconciles", testSlowRelease)
		t.Run("IgnoreAndReconcileAnnotations", testIgnore)
		t.Run("EnvironmentFilter", testEnvironment)
		t.Run("Paused", testPaused)
		t.Run("MissingProviderConfig", testMissingConfig)
		t.Run("InvalidUserInputNoHotLoop", testInvalidInput)
		t.Run("TransientErrorRetried", testTransientError)
		t.Run("ClusterAccessPendingAndFailing", testClusterAccess)
		t.Run("WaitingIsNotFailing", testWaiting)
	})
	t.Run("Metrics", testMetrics)
}

// The object goes Ready with phase, conditions, observedGeneration and
// finalizer, its domain service appears in the MCP, and a spec change is
// applied and observed.
func testGoesReady(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{Greeting: "hello"})
	p.createService(t, "svc", "one")

	obj := p.waitReady(t, "svc")
	if obj.Status.Phase != string(spruntime.PhaseReady) {
		t.Errorf("phase = %q, want Ready", obj.Status.Phase)
	}
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		t.Errorf("finalizers = %v, want %s", obj.Finalizers, finalizer)
	}
	if obj.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration = %d, want 1", obj.Status.ObservedGeneration)
	}
	cm := p.managed(t, "svc")
	if cm == nil || cm.Data["value"] != "one" || cm.Data["greeting"] != "hello" {
		t.Fatalf("managed ConfigMap = %v, want value one and greeting hello", cm)
	}

	p.update(t, "svc", func(o *testapi.TestService) { o.Spec.Value = "two" })
	waitFor(t, "the new value in the MCP", func() bool {
		cm := p.managed(t, "svc")
		return cm != nil && cm.Data["value"] == "two"
	})
	obj = p.waitReady(t, "svc")
	if obj.Generation != 2 || obj.Status.ObservedGeneration != 2 {
		t.Errorf("generation/observedGeneration = %d/%d, want 2/2", obj.Generation, obj.Status.ObservedGeneration)
	}
	evs := p.events(t, "svc")
	if slices.Contains(evs, "Warning/"+spruntime.ReasonDriftDetected) {
		t.Errorf("a spec change was reported as drift: events %v", evs)
	}
	// Success is in the conditions: neither the first one nor the one
	// after the spec change is an event (each would be a write).
	if slices.Contains(evs, "Normal/"+spruntime.ReasonReconcileSuccess) {
		t.Errorf("a success without a warning before it was recorded as an event: events %v", evs)
	}
}

// Polls of an up-to-date object neither call CreateOrUpdate (Observe says
// there is nothing to do) nor write its status.
func testPollWritesNothing(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{PollInterval: common.DurationOf(time.Second)})
	p.createService(t, "svc", "one")
	p.waitReady(t, "svc")
	// Wait for the first poll to settle the status (its Synced message).
	waitFor(t, "a poll", func() bool {
		c := cond(p.get(t, "svc"), spruntime.ConditionSynced)
		return c != nil && c.Message == "The service is up to date"
	})
	obj := p.get(t, "svc")
	creates, reconciles := p.domain.createCalls("svc"), p.reconciles(t)
	waitFor(t, "two more polls", func() bool { return p.reconciles(t) >= reconciles+2 })
	if got := p.get(t, "svc"); got.ResourceVersion != obj.ResourceVersion {
		t.Errorf("polls wrote the object: resourceVersion %s -> %s (%s)", obj.ResourceVersion, got.ResourceVersion, describe(got))
	}
	if got := p.domain.createCalls("svc"); got != creates {
		t.Errorf("CreateOrUpdate calls went from %d to %d while the service was up to date", creates, got)
	}
}

// A change of the ProviderConfig, and of a Secret it references, reaches
// every object without waiting for a poll (the default poll is a minute).
func testConfigChange(t *testing.T) {
	t.Parallel()
	p := startProviderWith(t, func(ns string) []spruntime.Option {
		return []spruntime.Option{spruntime.WithSecretWatch(ns, func(cfg *testapi.ProviderConfig, s *corev1.Secret) bool {
			return s.Name == cfg.Spec.SecretName
		})}
	})
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "creds"}, Data: map[string][]byte{"user": []byte("u")}}
	if err := platformC.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cfg := p.createConfig(t, testapi.ProviderConfigSpec{Greeting: "hello", SecretName: "creds"})
	p.createService(t, "svc", "one")
	p.waitReady(t, "svc")
	if cm := p.managed(t, "svc"); cm.Data["secretKeys"] != "user" {
		t.Fatalf("secretKeys = %q, want user", cm.Data["secretKeys"])
	}

	cfg.Spec.Greeting = "bonjour"
	if err := platformC.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new greeting in the MCP", func() bool { return p.managed(t, "svc").Data["greeting"] == "bonjour" })

	secret.Data["password"] = []byte("p")
	if err := platformC.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Secret's new key in the MCP", func() bool { return p.managed(t, "svc").Data["secretKeys"] == "password,user" })
	p.waitReady(t, "svc")
	if evs := p.events(t, "svc"); slices.Contains(evs, "Warning/"+spruntime.ReasonDriftDetected) {
		t.Errorf("a ProviderConfig change was reported as drift: events %v", evs)
	}
}

// Deleting the domain service in the MCP is noticed on the next poll,
// reported as a DriftDetected event, and repaired.
func testDrift(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{})
	p.createService(t, "svc", "one", annotate(spruntime.PollIntervalAnnotation, "1s"))
	p.waitReady(t, "svc")
	before := testenv.MetricValue(t, spruntime.MetricDriftsTotal, map[string]string{"kind": "TestService"})

	cm := p.managed(t, "svc")
	if err := mcpC.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ConfigMap to be recreated", func() bool {
		got := p.managed(t, "svc")
		return got != nil && got.UID != cm.UID
	})
	e := p.waitEvent(t, "svc", corev1.EventTypeWarning, spruntime.ReasonDriftDetected)
	if !strings.Contains(e.Note, managedName("svc")+" is missing") {
		t.Errorf("drift event note = %q, want it to say what drifted", e.Note)
	}
	if after := testenv.MetricValue(t, spruntime.MetricDriftsTotal, map[string]string{"kind": "TestService"}); after <= before {
		t.Errorf("%s did not grow: %v -> %v", spruntime.MetricDriftsTotal, before, after)
	}
	p.waitReady(t, "svc")
}

// Deletion waits with DeletionBlocked while a user object exists in the
// MCP, without calling Delete, and finishes once it is removed.
func testDeletionBlocked(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	// Delete takes two rounds, so that the cleared DeletionBlocked is
	// visible before the object goes.
	p.domain.mu.Lock()
	p.domain.slowDelete = true
	p.domain.mu.Unlock()
	p.createConfig(t, testapi.ProviderConfigSpec{})
	obj := p.createService(t, "svc", "one")
	p.waitReady(t, "svc")
	ctx := context.Background()
	user := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "users-thing", Labels: map[string]string{userLabel: "svc"}}}
	if err := mcpC.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	if err := onboardingC.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}

	var got *testapi.TestService
	waitFor(t, "DeletionBlocked", func() bool {
		got = p.get(t, "svc")
		return hasCond(got, spruntime.ConditionDeletionBlocked, metav1.ConditionTrue, spruntime.ReasonUserResourcesPresent)
	})
	if msg := cond(got, spruntime.ConditionDeletionBlocked).Message; !strings.Contains(msg, "ConfigMap "+p.ns+"/users-thing") {
		t.Errorf("DeletionBlocked message %q does not name the user's object", msg)
	}
	if got.Status.Phase != string(spruntime.PhaseTerminating) {
		t.Errorf("phase = %q, want Terminating", got.Status.Phase)
	}
	p.waitEvent(t, "svc", corev1.EventTypeWarning, spruntime.ReasonUserResourcesPresent)
	stays(t, "the service to stay while the user object exists", func() bool {
		return p.managed(t, "svc") != nil && p.domain.deleteCalls("svc") == 0 && p.get(t, "svc") != nil
	})

	if err := mcpC.Delete(ctx, user); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "DeletionBlocked=False", func() bool {
		return hasCond(p.get(t, "svc"), spruntime.ConditionDeletionBlocked, metav1.ConditionFalse, spruntime.ReasonDeletionUnblocked)
	})
	p.waitEvent(t, "svc", corev1.EventTypeNormal, spruntime.ReasonDeletionUnblocked)
	waitFor(t, "the TestService to be gone", func() bool { return p.get(t, "svc") == nil })
	if p.managed(t, "svc") != nil {
		t.Error("the managed ConfigMap is still in the MCP after deletion")
	}
	if n := p.access.releaseCalls("svc"); n != 1 {
		t.Errorf("Release calls = %d, want 1", n)
	}
}

// Release may need several reconciles; meanwhile the runtime neither asks
// for the clusters again nor calls Delete again, and keeps the finalizer.
func testSlowRelease(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.access.mu.Lock()
	p.access.releaseRounds = 3
	p.access.mu.Unlock()
	p.createConfig(t, testapi.ProviderConfigSpec{})
	obj := p.createService(t, "svc", "one")
	p.waitReady(t, "svc")
	if err := onboardingC.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Ready reason ReleasingClusterAccess", func() bool {
		return hasCond(p.get(t, "svc"), spruntime.ConditionReady, metav1.ConditionFalse, spruntime.ReasonReleasingAccess)
	})
	waitFor(t, "the TestService to be gone", func() bool { return p.get(t, "svc") == nil })
	if n := p.access.releaseCalls("svc"); n != 4 {
		t.Errorf("Release calls = %d, want 4 (3 not done, then done)", n)
	}
	if n := p.domain.deleteCalls("svc"); n != 1 {
		t.Errorf("Delete calls = %d, want 1", n)
	}
	p.access.mu.Lock()
	defer p.access.mu.Unlock()
	if p.access.clustersAfterRelease != 0 {
		t.Errorf("Clusters was called %d times after Release started", p.access.clustersAfterRelease)
	}
}

// The orphan policy removes the object without calling Delete: the domain
// service stays in the MCP; access is released.
func testOrphan(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{})
	obj := p.createService(t, "svc", "one", annotate(spruntime.DeletionPolicyAnnotation, string(spruntime.DeletionPolicyOrphan)))
	p.waitReady(t, "svc")
	if err := onboardingC.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the TestService to be gone", func() bool { return p.get(t, "svc") == nil })
	if p.managed(t, "svc") == nil {
		t.Error("the orphaned service's ConfigMap was deleted")
	}
	if n := p.domain.deleteCalls("svc"); n != 0 {
		t.Errorf("Delete was called %d times for an orphaned object", n)
	}
	if n := p.access.releaseCalls("svc"); n != 1 {
		t.Errorf("Release calls = %d, want 1", n)
	}
	p.waitEvent(t, "svc", corev1.EventTypeNormal, spruntime.ReasonOrphaned)
}

// operation=ignore stops reconciliation, spec changes included;
// operation=reconcile forces one and is removed.
func testIgnore(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{})
	p.createService(t, "svc", "one")
	p.waitReady(t, "svc")

	p.update(t, "svc", func(o *testapi.TestService) {
		annotate(spruntime.OperationAnnotation, spruntime.OperationIgnore)(o)
		o.Spec.Value = "two"
	})
	stays(t, "the ignored object to be left alone", func() bool {
		obj := p.get(t, "svc")
		return p.managed(t, "svc").Data["value"] == "one" && obj.Status.ObservedGeneration == 1
	})

	p.update(t, "svc", annotate(spruntime.OperationAnnotation, spruntime.OperationReconcile))
	waitFor(t, "the new value in the MCP", func() bool { return p.managed(t, "svc").Data["value"] == "two" })
	obj := p.waitReady(t, "svc")
	waitFor(t, "the reconcile annotation to be removed", func() bool {
		_, ok := p.get(t, "svc").Annotations[spruntime.OperationAnnotation]
		return !ok
	})
	if obj.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration = %d, want 2", obj.Status.ObservedGeneration)
	}
}

// A provider serves objects of its environment and unlabelled ones, and
// leaves objects of other environments entirely alone.
func testEnvironment(t *testing.T) {
	t.Parallel()
	p := startProvider(t, spruntime.WithEnvironment("blue"))
	p.createConfig(t, testapi.ProviderConfigSpec{})
	p.createService(t, "green", "one", label(spruntime.EnvironmentLabel, "green"))
	p.createService(t, "blue", "one", label(spruntime.EnvironmentLabel, "blue"))
	p.createService(t, "plain", "one")
	p.waitReady(t, "blue")
	p.waitReady(t, "plain")
	stays(t, "the other environment's object to be untouched", func() bool {
		obj := p.get(t, "green")
		return len(obj.Finalizers) == 0 && len(obj.Status.Conditions) == 0 && p.managed(t, "green") == nil
	})
}

// A paused object says so and is not reconciled until unpaused.
func testPaused(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{})
	p.createService(t, "svc", "one", annotate(spruntime.PausedAnnotation, "true"))
	waitFor(t, "Synced=False/Paused", func() bool {
		return hasCond(p.get(t, "svc"), spruntime.ConditionSynced, metav1.ConditionFalse, spruntime.ReasonPaused)
	})
	stays(t, "nothing to happen while paused", func() bool {
		return p.managed(t, "svc") == nil && p.domain.createCalls("svc") == 0
	})
	p.update(t, "svc", func(o *testapi.TestService) { delete(o.Annotations, spruntime.PausedAnnotation) })
	p.waitReady(t, "svc")
}

// Without a ProviderConfig the object says so and is not retried; creating
// the ProviderConfig makes it Ready without anyone touching the object.
func testMissingConfig(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createService(t, "svc", "one")
	var obj *testapi.TestService
	waitFor(t, "Ready=False/ProviderConfigMissing", func() bool {
		obj = p.get(t, "svc")
		return hasCond(obj, spruntime.ConditionReady, metav1.ConditionFalse, spruntime.ReasonProviderConfigMissing) &&
			hasCond(obj, spruntime.ConditionSynced, metav1.ConditionFalse, spruntime.ReasonProviderConfigMissing)
	})
	if obj.Status.Phase != string(spruntime.PhasePending) {
		t.Errorf("phase = %q, want Pending", obj.Status.Phase)
	}
	n := p.settledReconciles(t)
	stays(t, "no retries without a ProviderConfig", func() bool { return p.reconciles(t) <= n+1 })

	cfg := p.createConfig(t, testapi.ProviderConfigSpec{})
	obj = p.waitReady(t, "svc")
	if obj.Generation != 1 {
		t.Errorf("generation = %d: the object was changed", obj.Generation)
	}

	// A ProviderConfig being deleted (held by a finalizer) is reported as
	// such, and its disappearance as missing.
	ctx := context.Background()
	controllerutil.AddFinalizer(cfg, "test.services.openmcp.cloud/hold")
	if err := platformC.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := platformC.Delete(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Ready=False/ProviderConfigDeleting", func() bool {
		return hasCond(p.get(t, "svc"), spruntime.ConditionReady, metav1.ConditionFalse, spruntime.ReasonProviderConfigDeleting)
	})
	if err := platformC.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		t.Fatal(err)
	}
	controllerutil.RemoveFinalizer(cfg, "test.services.openmcp.cloud/hold")
	if err := platformC.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Ready=False/ProviderConfigMissing", func() bool {
		return hasCond(p.get(t, "svc"), spruntime.ConditionReady, metav1.ConditionFalse, spruntime.ReasonProviderConfigMissing)
	})
}

// Invalid input is a condition and a warning, without retries, until the
// user fixes it.
func testInvalidInput(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{})
	p.createService(t, "svc", invalidValue)
	var obj *testapi.TestService
	waitFor(t, "Ready=False/InvalidValue", func() bool {
		obj = p.get(t, "svc")
		return hasCond(obj, spruntime.ConditionReady, metav1.ConditionFalse, "InvalidValue") &&
			hasCond(obj, spruntime.ConditionSynced, metav1.ConditionFalse, "InvalidValue")
	})
	if obj.Status.Phase != string(spruntime.PhaseFailed) {
		t.Errorf("phase = %q, want Failed", obj.Status.Phase)
	}
	p.waitEvent(t, "svc", corev1.EventTypeWarning, "InvalidValue")
	n := p.settledReconciles(t)
	calls := p.domain.createCalls("svc")
	stays(t, "no retries of invalid input", func() bool {
		return p.domain.createCalls("svc") == calls && p.reconciles(t) <= n+1
	})

	p.update(t, "svc", func(o *testapi.TestService) { o.Spec.Value = "valid" })
	p.waitReady(t, "svc")
}

// A WaitingError (here from cluster access: no capacity) sets
// Ready=False with its reason and phase Progressing for a service that was
// Ready (Pending for a new one), without retries; once the wait is over,
// the next reconcile finds the service up to date (Observe, no
// CreateOrUpdate) and sets it Ready again, because that Ready=False was the
// runtime's, not the author's.
func testWaiting(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{})
	p.createService(t, "svc", "one")
	p.waitReady(t, "svc")
	p.access.set(false, spruntime.Waiting("NoCapacity", "no cluster has room (simulated)"))
	// A label change reconciles without changing what CreateOrUpdate
	// would write.
	p.update(t, "svc", func(o *testapi.TestService) { o.Labels = map[string]string{"wait": "1"} })
	var obj *testapi.TestService
	waitFor(t, "Ready=False/NoCapacity", func() bool {
		obj = p.get(t, "svc")
		return hasCond(obj, spruntime.ConditionReady, metav1.ConditionFalse, "NoCapacity") &&
			hasCond(obj, spruntime.ConditionSynced, metav1.ConditionFalse, "NoCapacity")
	})
	if obj.Status.Phase != string(spruntime.PhaseProgressing) {
		t.Errorf("phase = %q while waiting, want Progressing", obj.Status.Phase)
	}
	n := p.settledReconciles(t)
	stays(t, "no retries while waiting", func() bool { return p.reconciles(t) <= n+1 })

	p.access.set(false, nil)
	calls := p.domain.createCalls("svc")
	p.update(t, "svc", func(o *testapi.TestService) { o.Labels = map[string]string{"wait": "over"} })
	p.waitReady(t, "svc")
	if got := p.domain.createCalls("svc"); got != calls {
		t.Errorf("CreateOrUpdate calls went from %d to %d; want none: the service was up to date", calls, got)
	}
}

// A transient error sets Synced=False/ReconcileError and is retried with
// backoff until it works.
func testTransientError(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{})
	p.domain.failTimes("svc", 3)
	before := testenv.MetricValue(t, spruntime.MetricReconcileErrorsTotal, map[string]string{"kind": "TestService", "reason": spruntime.ReasonReconcileError})
	p.createService(t, "svc", "one")
	p.waitReady(t, "svc")
	if n := p.domain.createCalls("svc"); n < 4 {
		t.Errorf("CreateOrUpdate calls = %d, want at least 4 (3 failures, then success)", n)
	}
	p.waitEvent(t, "svc", corev1.EventTypeWarning, spruntime.ReasonReconcileError)
	if after := testenv.MetricValue(t, spruntime.MetricReconcileErrorsTotal, map[string]string{"kind": "TestService", "reason": spruntime.ReasonReconcileError}); after < before+3 {
		t.Errorf("%s{reason=ReconcileError} grew by %v, want at least 3", spruntime.MetricReconcileErrorsTotal, after-before)
	}
}

// Pending cluster access is a condition and a short requeue; failing access
// is Synced=False and retried.
func testClusterAccess(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	p.createConfig(t, testapi.ProviderConfigSpec{})
	p.access.set(true, nil)
	p.createService(t, "svc", "one")
	waitFor(t, "Ready=False/ClusterAccessPending", func() bool {
		return hasCond(p.get(t, "svc"), spruntime.ConditionReady, metav1.ConditionFalse, spruntime.ReasonClusterAccessPending)
	})
	if got := p.get(t, "svc"); !controllerutil.ContainsFinalizer(got, finalizer) {
		t.Errorf("finalizer missing while access is pending: %s", describe(got))
	}
	p.access.set(false, errors.New("no access (simulated)"))
	waitFor(t, "Synced=False/ClusterAccessFailed", func() bool {
		return hasCond(p.get(t, "svc"), spruntime.ConditionSynced, metav1.ConditionFalse, spruntime.ReasonClusterAccessFailed)
	})
	p.access.set(false, nil)
	p.waitReady(t, "svc")
	if p.domain.createCalls("svc") == 0 {
		t.Error("CreateOrUpdate never ran")
	}
}

// The runtime's metrics exist with sensible values after the scenarios.
func testMetrics(t *testing.T) {
	kind := map[string]string{"kind": "TestService"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{spruntime.MetricReconcilesTotal, map[string]string{"kind": "TestService", "result": spruntime.ResultSuccess}, 10},
		{spruntime.MetricReconcilesTotal, map[string]string{"kind": "TestService", "result": spruntime.ResultError}, 3},
		{spruntime.MetricReconcilesTotal, map[string]string{"kind": "TestService", "result": spruntime.ResultInvalidInput}, 1},
		{spruntime.MetricReconcilesTotal, map[string]string{"kind": "TestService", "result": spruntime.ResultWaiting}, 1},
		{spruntime.MetricReconcilesTotal, map[string]string{"kind": "TestService", "result": spruntime.ResultSkipped}, 1},
		{spruntime.MetricReconcilesTotal, map[string]string{"kind": "TestService", "result": spruntime.ResultDeleted}, 2},
		{spruntime.MetricReconcileErrorsTotal, map[string]string{"kind": "TestService", "reason": spruntime.ReasonClusterAccessFailed}, 1},
		{spruntime.MetricReconcileErrorsTotal, map[string]string{"kind": "TestService", "reason": spruntime.ReasonInvalidUserInput}, 1},
		{spruntime.MetricDriftsTotal, kind, 1},
		{spruntime.MetricReconcileDuration, kind, 10},
	} {
		if got := testenv.MetricValue(t, c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}
	// Every reconcile is counted once and timed once.
	total := testenv.MetricValue(t, spruntime.MetricReconcilesTotal, kind)
	if timed := testenv.MetricValue(t, spruntime.MetricReconcileDuration, kind); timed != total {
		t.Errorf("%s has %v samples, %s counts %v reconciles", spruntime.MetricReconcileDuration, timed, spruntime.MetricReconcilesTotal, total)
	}
}
