package broker_test

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestOnboardingAPIServerRestart stops the kube-apiserver of a broker's
// onboarding cluster (a cluster of this test alone, with its own test
// provisioner) and starts it again on the same address: while it is down,
// every request that needs it answers 503 with Retry-After and an OSB error
// body, and changes nothing; the catalog and last_operation keep answering
// from the caches; once it is back, the same broker process provisions
// again and its cache follows the provisioner, with no restart. It logs
// how long the broker took to recover.
func TestOnboardingAPIServerRestart(t *testing.T) {
	setup(t)
	ctx, cancel := context.WithCancel(env.ctx)
	defer cancel()
	onboarding := testenv.Start(t, testenv.WithName("onboarding-restart"))
	mgr, err := ctrl.NewManager(onboarding.Config, ctrl.Options{
		Scheme:  onboarding.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := startProvisioner(mgr); err != nil {
		t.Fatal(err)
	}
	mgrDone := make(chan struct{})
	go func() { defer close(mgrDone); _ = mgr.Start(ctx) }()
	defer func() { cancel(); <-mgrDone }()
	kubeconfig, err := onboarding.KubeconfigPath()
	if err != nil {
		t.Fatal(err)
	}
	b, err := startBrokerProcess(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.stop(); err != nil {
			t.Errorf("the broker did not shut down cleanly: %v", err)
		}
	}()
	hh := h{t: t, base: b.url}
	const before, held, during = "apirestart-before", "apirestart-held", "apirestart-during"
	hh.ready(before, planSmall, nil)
	hh.expect(hh.provision(held, planAsync, obj{"hold": true}, true), 202, "provision the held instance")
	hh.awaitInstance(held, "create-1", "in progress")

	if err := onboarding.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	// Every endpoint that must reach the API server: 503, Retry-After,
	// the broker's error code and a description.
	for what, c := range map[string]call{
		"provision":   {method: "PUT", path: instancePath(during), body: provisionBody(planSmall, nil)},
		"update":      {method: "PATCH", path: instancePath(before), body: obj{"service_id": "svc-sync", "parameters": obj{"size": 3}}},
		"deprovision": {method: "DELETE", path: instancePath(before), query: deleteQuery(planSmall, false)},
		"bind":        {method: "PUT", path: bindingPath(before, "apirestart-binding"), body: bindBody(planSmall, nil)},
	} {
		start := time.Now()
		r := hh.do(c)
		if r.status != 503 || r.header.Get("Retry-After") != "5" || r.str("error") != osb.CodeStorageUnavailable || r.str("description") == "" {
			t.Errorf("%s while the API server is down: %s, Retry-After %q; want 503 with Retry-After 5, error %s and a description",
				what, r, r.header.Get("Retry-After"), osb.CodeStorageUnavailable)
		}
		if took := time.Since(start); took > testSyncTimeout {
			t.Errorf("%s while the API server is down took %s: an outage should be answered at once, not after waiting", what, took)
		}
	}
	// What the caches hold is still served.
	hh.expect(hh.do(call{method: "GET", path: "/v2/catalog"}), 200, "catalog while the API server is down")
	if r := hh.do(call{method: "GET", path: instancePath(held) + "/last_operation", query: "operation=create-1"}); r.status != 200 || r.str("state") != "in progress" {
		t.Errorf("last_operation while the API server is down: %s, want 200 in progress from the cache", r)
	}
	if r := hh.do(call{method: "GET", path: instancePath(before) + "/last_operation"}); r.status != 200 || r.str("state") != "succeeded" {
		t.Errorf("last_operation while the API server is down: %s, want 200 succeeded from the cache", r)
	}

	startCall := time.Now()
	if err := onboarding.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	t.Logf("API server down for %s; StartAPIServer took %s", up.Sub(down).Round(time.Millisecond), up.Sub(startCall).Round(time.Millisecond))

	// Nothing was written while it was down.
	inst := &osbv1alpha1.SFServiceInstance{}
	if err := onboarding.Client.Get(ctx, sf.InstanceKey(before), inst); err != nil {
		t.Fatal(err)
	}
	if inst.DeletionTimestamp != nil || inst.Generation != 1 || inst.Annotations[sf.AnnotationOperation] != "create-1" {
		t.Errorf("the refused requests changed the instance: deleting %v, generation %d, operation %q",
			inst.DeletionTimestamp != nil, inst.Generation, inst.Annotations[sf.AnnotationOperation])
	}

	// The same process writes again at once, and provisions: a re-sent
	// request succeeds once the provisioner and the broker's cache have
	// reconnected too (a synchronous provision waits for the cache).
	poll(t, b.url, call{method: "GET", path: instancePath(during)}, 90*time.Second,
		"a read of the API server once it is back (the broker should reconnect by itself)",
		func(r reply) bool { return r.status != 503 })
	t.Logf("first answer other than 503 %s after the API server was ready", time.Since(up).Round(time.Millisecond))
	poll(t, b.url, call{method: "PUT", path: instancePath(during), body: provisionBody(planSmall, nil)}, 90*time.Second,
		"a provision once the API server is back (the broker should reconnect by itself)",
		func(r reply) bool { return r.status == 201 || r.status == 200 })
	t.Logf("first provision answered 201 %s after the API server was ready", time.Since(up).Round(time.Millisecond))

	// Its cache follows the API server again: a change the provisioner
	// makes (the held instance finishes) reaches last_operation, which
	// reads from the cache.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+annotationRelease+`":"true"}}}`))
	key := sf.InstanceKey(held)
	heldObj := &osbv1alpha1.SFServiceInstance{}
	heldObj.Name, heldObj.Namespace = key.Name, key.Namespace
	if err := onboarding.Client.Patch(ctx, heldObj, patch); err != nil {
		t.Fatalf("release the held instance: %v", err)
	}
	released := time.Now()
	hh.awaitInstance(held, "create-1", "succeeded")
	t.Logf("last_operation reported the provisioner's change %s after it was released (%s after the API server was ready)",
		time.Since(released).Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
	hh.expect(hh.do(call{method: "DELETE", path: instancePath(before), query: deleteQuery(planSmall, false)}), 200, "deprovision once the API server is back")
}
