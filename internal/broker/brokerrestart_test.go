package broker_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// pending is an operation a platform is polling across a broker restart.
type pending struct {
	name string
	// path is the last_operation path; op the operation polled.
	path, op string
	// want is the state the first answer of the new broker must report;
	// gone accepts 410 instead (a finished delete whose tombstone may have
	// been released meanwhile, by the shared broker's reaper).
	want string
	gone bool
	// release, when set, is the object to release after the restart;
	// then the operation must go on to succeeded through the new broker.
	release client.Object
	key     client.ObjectKey
}

// TestBrokerRestartLastOperation starts asynchronous provisions, updates,
// deprovisions, binds and unbinds, some held in progress, some finished,
// some failed, stops the broker, lets one of each kind finish while no
// broker runs, and starts a new broker on the same API servers: the new
// process's first last_operation answer for each operation is what the
// objects say (state lives in the API objects only), and the operations
// still held go on to succeeded once the provisioner finishes them.
func TestBrokerRestartLastOperation(t *testing.T) {
	setup(t)
	b, err := startBrokerProcess(env.kubeconfigs["onboarding"])
	if err != nil {
		t.Fatal(err)
	}
	hh := h{t: t, base: b.url}
	ip := func(id string) string { return instancePath(id) + "/last_operation" }
	bp := func(id, bid string) string { return bindingPath(id, bid) + "/last_operation" }
	instKey := sf.InstanceKey
	var ops []pending

	// Provisions: held, held and finished while no broker runs, failed,
	// succeeded.
	hh.expect(hh.provision("rs-prov-held", planAsync, obj{"hold": true}, true), 202, "provision rs-prov-held")
	ops = append(ops, pending{name: "provision held", path: ip("rs-prov-held"), op: "create-1", want: "in progress",
		release: &osbv1alpha1.SFServiceInstance{}, key: instKey("rs-prov-held")})
	hh.expect(hh.provision("rs-prov-downtime", planAsync, obj{"hold": true}, true), 202, "provision rs-prov-downtime")
	ops = append(ops, pending{name: "provision finished while no broker ran", path: ip("rs-prov-downtime"), op: "create-1", want: "succeeded"})
	hh.expect(hh.provision("rs-prov-failed", planAsync, obj{"fail": true}, true), 202, "provision rs-prov-failed")
	hh.awaitInstance("rs-prov-failed", "create-1", "failed")
	ops = append(ops, pending{name: "provision failed", path: ip("rs-prov-failed"), op: "create-1", want: "failed"})
	hh.ready("rs-prov-done", planAsync, nil)
	ops = append(ops, pending{name: "provision succeeded", path: ip("rs-prov-done"), op: "create-1", want: "succeeded"})

	// Update: held.
	hh.ready("rs-update-held", planAsync, nil)
	r := hh.expect(hh.do(call{method: "PATCH", path: instancePath("rs-update-held"), query: "accepts_incomplete=true",
		body: obj{"service_id": "svc-async", "parameters": obj{"hold": true}}}), 202, "update rs-update-held")
	ops = append(ops, pending{name: "update held", path: ip("rs-update-held"), op: r.str("operation"), want: "in progress",
		release: &osbv1alpha1.SFServiceInstance{}, key: instKey("rs-update-held")})

	// Deprovisions: held, failed, finished.
	hh.ready("rs-deprov-held", planAsync, obj{"holdDelete": true})
	r = hh.expect(hh.do(call{method: "DELETE", path: instancePath("rs-deprov-held"), query: deleteQuery(planAsync, true)}), 202, "deprovision rs-deprov-held")
	hh.awaitInstance("rs-deprov-held", r.str("operation"), "in progress")
	ops = append(ops, pending{name: "deprovision held", path: ip("rs-deprov-held"), op: r.str("operation"), want: "in progress",
		release: &osbv1alpha1.SFServiceInstance{}, key: instKey("rs-deprov-held")})
	hh.ready("rs-deprov-failed", planAsync, obj{"failDelete": true})
	r = hh.expect(hh.do(call{method: "DELETE", path: instancePath("rs-deprov-failed"), query: deleteQuery(planAsync, true)}), 202, "deprovision rs-deprov-failed")
	hh.awaitInstance("rs-deprov-failed", r.str("operation"), "failed")
	ops = append(ops, pending{name: "deprovision failed", path: ip("rs-deprov-failed"), op: r.str("operation"), want: "failed"})
	hh.ready("rs-deprov-done", planAsync, nil)
	r = hh.expect(hh.do(call{method: "DELETE", path: instancePath("rs-deprov-done"), query: deleteQuery(planAsync, true)}), 202, "deprovision rs-deprov-done")
	hh.awaitInstance("rs-deprov-done", r.str("operation"), "succeeded")
	ops = append(ops, pending{name: "deprovision finished", path: ip("rs-deprov-done"), op: r.str("operation"), want: "succeeded", gone: true})

	// Binds and unbinds on one instance: held, held and finished while
	// no broker runs, failed, succeeded; an unbind held and one finished.
	const host = "rs-bind-host"
	hh.ready(host, planAsync, nil)
	bind := func(bid string, params obj) string {
		t.Helper()
		return hh.expect(hh.bind(host, bid, planAsync, params, true), 202, "bind "+bid).str("operation")
	}
	ops = append(ops, pending{name: "bind held", path: bp(host, "rs-b-held"), op: bind("rs-b-held", obj{"hold": true}), want: "in progress",
		release: &osbv1alpha1.SFServiceBinding{}, key: sf.BindingKey(host, "rs-b-held")})
	ops = append(ops, pending{name: "bind finished while no broker ran", path: bp(host, "rs-b-downtime"),
		op: bind("rs-b-downtime", obj{"hold": true}), want: "succeeded"})
	op := bind("rs-b-failed", obj{"fail": true})
	hh.await(bp(host, "rs-b-failed"), op, "failed", "binding rs-b-failed")
	ops = append(ops, pending{name: "bind failed", path: bp(host, "rs-b-failed"), op: op, want: "failed"})
	op = bind("rs-b-done", nil)
	hh.awaitBindingSucceeded(host, "rs-b-done", op)
	ops = append(ops, pending{name: "bind succeeded", path: bp(host, "rs-b-done"), op: op, want: "succeeded"})
	for _, bid := range []string{"rs-unbind-held", "rs-unbind-done"} {
		params := obj{}
		if bid == "rs-unbind-held" {
			params["holdDelete"] = true
		}
		hh.awaitBindingSucceeded(host, bid, bind(bid, params))
	}
	r = hh.expect(hh.do(call{method: "DELETE", path: bindingPath(host, "rs-unbind-held"), query: deleteQuery(planAsync, true)}), 202, "unbind rs-unbind-held")
	hh.await(bp(host, "rs-unbind-held"), r.str("operation"), "in progress", "binding rs-unbind-held")
	ops = append(ops, pending{name: "unbind held", path: bp(host, "rs-unbind-held"), op: r.str("operation"), want: "in progress",
		release: &osbv1alpha1.SFServiceBinding{}, key: sf.BindingKey(host, "rs-unbind-held")})
	r = hh.expect(hh.do(call{method: "DELETE", path: bindingPath(host, "rs-unbind-done"), query: deleteQuery(planAsync, true)}), 202, "unbind rs-unbind-done")
	hh.awaitBindingSucceeded(host, "rs-unbind-done", r.str("operation"))
	ops = append(ops, pending{name: "unbind finished", path: bp(host, "rs-unbind-done"), op: r.str("operation"), want: "succeeded", gone: true})

	// Before the stop, every held operation answers in progress.
	for _, p := range ops {
		if p.release == nil {
			continue
		}
		if r := hh.do(call{method: "GET", path: p.path, query: "operation=" + p.op}); r.status != 200 || r.str("state") != "in progress" {
			t.Fatalf("%s before the restart: %s, want 200 in progress", p.name, r)
		}
	}

	if err := b.stop(); err != nil {
		t.Fatalf("the broker did not shut down cleanly: %v", err)
	}
	// While no broker runs, the provisioner finishes two operations.
	release(t, instKey("rs-prov-downtime"), &osbv1alpha1.SFServiceInstance{})
	release(t, sf.BindingKey(host, "rs-b-downtime"), &osbv1alpha1.SFServiceBinding{})
	waitState(t, instKey("rs-prov-downtime"), &osbv1alpha1.SFServiceInstance{}, osbv1alpha1.StateSucceeded)
	waitState(t, sf.BindingKey(host, "rs-b-downtime"), &osbv1alpha1.SFServiceBinding{}, osbv1alpha1.StateSucceeded)

	start := time.Now()
	b, err = startBrokerProcess(env.kubeconfigs["onboarding"])
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.stop(); err != nil {
			t.Errorf("the new broker did not shut down cleanly: %v", err)
		}
	}()
	t.Logf("new broker ready %s after it was started", time.Since(start).Round(time.Millisecond))
	hh.base = b.url
	for _, p := range ops {
		r := hh.do(call{method: "GET", path: p.path, query: "operation=" + p.op})
		switch {
		case p.gone && r.status == 410:
		case r.status != 200 || r.str("state") != p.want:
			t.Errorf("%s (%s): the new broker's first answer is %s, want 200 %s", p.name, p.op, r, p.want)
		}
	}
	for _, p := range ops {
		if p.release == nil {
			continue
		}
		release(t, p.key, p.release)
		hh.await(p.path, p.op, "succeeded", p.name+" after the restart")
	}
}

// waitState waits until the stored object at key reports state.
func waitState(t *testing.T, key client.ObjectKey, o client.Object, state osbv1alpha1.State) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.onboarding.Client.Get(ctx, key, o); err != nil {
			return false, nil
		}
		switch v := o.(type) {
		case *osbv1alpha1.SFServiceInstance:
			return v.Status.State == state, nil
		case *osbv1alpha1.SFServiceBinding:
			return v.Status.State == state, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s did not reach state %s within 30s (the test provisioner should finish it once released)", key, state)
	}
}
