package broker_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// TestAsyncLifecycle runs an asynchronous plan through its whole life as a
// platform would: provision, poll, fetch, bind, poll, fetch the binding,
// unbind, poll until 410, deprovision, poll. Between the end of the
// deprovision and its 410 the (shared) broker restarts: the tombstone, kept
// on the object, still answers "succeeded" to the new process. No other
// broker runs meanwhile, so no other reaper releases the tombstone.
func TestAsyncLifecycle(t *testing.T) {
	b := setup(t)
	const ttl = testTombstoneTTL
	hh := h{t: t, base: b.url}
	const id, bid = "async-lifecycle", "async-lifecycle-binding"

	hh.expect(hh.do(call{method: "GET", path: "/v2/catalog"}), 200, "catalog")

	// Provision: held by the provisioner until released, so that the poll
	// sees "in progress" before "succeeded".
	r := hh.expect(hh.provision(id, planAsync, obj{"hold": true}, true), 202, "provision")
	op := r.str("operation")
	if op != "create-1" || r.str("dashboard_url") != "https://dash.example.com/"+id {
		t.Fatalf("provision answered %s", r)
	}
	lo := hh.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=" + op + "&service_id=svc-async&plan_id=" + planAsync})
	if lo.status != 200 || lo.str("state") != "in progress" {
		t.Fatalf("last_operation while held: %s", lo)
	}
	hh.expect(hh.do(call{method: "GET", path: instancePath(id)}), 404, "fetch while provisioning")
	releaseInstance(t, id)
	hh.awaitInstance(id, op, "succeeded")
	f := hh.expect(hh.do(call{method: "GET", path: instancePath(id)}), 200, "fetch")
	if f.str("dashboard_url") != "https://dashboard.example.com/"+id {
		t.Errorf("fetched dashboard_url %q: the provisioner's URL should win over the template", f.str("dashboard_url"))
	}

	// Bind.
	r = hh.expect(hh.bind(id, bid, planAsync, obj{"role": "reader"}, true), 202, "bind")
	hh.awaitBindingSucceeded(id, bid, r.str("operation"))
	fb := hh.expect(hh.do(call{method: "GET", path: bindingPath(id, bid)}), 200, "fetch binding")
	if field(fb.body, "credentials", "username") != "user-"+bid || field(fb.body, "parameters", "role") != "reader" {
		t.Errorf("fetched binding %s", fb)
	}

	// Unbind, and poll through the tombstone to 410.
	r = hh.expect(hh.do(call{method: "DELETE", path: bindingPath(id, bid), query: deleteQuery(planAsync, true)}), 202, "unbind")
	unbindOp := r.str("operation")
	hh.awaitBindingSucceeded(id, bid, unbindOp)
	poll(t, b.url, call{method: "GET", path: bindingPath(id, bid) + "/last_operation", query: "operation=" + unbindOp},
		3*ttl, "binding 410", func(r reply) bool { return r.status == 410 })
	hh.expect(hh.do(call{method: "DELETE", path: bindingPath(id, bid), query: deleteQuery(planAsync, true)}), 410, "unbind again")

	// Deprovision.
	r = hh.expect(hh.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, true)}), 202, "deprovision")
	delOp := r.str("operation")
	if delOp != "delete-2" {
		t.Errorf("deprovision operation %q, want delete-2", delOp)
	}
	hh.awaitInstance(id, delOp, "succeeded")
	// The deletion writes nothing but the DELETE: the annotation still
	// names the provision, and the deletion is the operation after it.
	if inst := instance(t, id); !sf.IsTombstone(inst) || inst.Annotations[sf.AnnotationOperation] != "create-1" {
		t.Fatalf("after the deletion the instance should be a tombstone whose annotation names create-1, before %s: finalizers %v, annotations %v", delOp, inst.Finalizers, inst.Annotations)
	}

	// Restart: the new process finds the tombstone.
	if err := b.stop(); err != nil {
		t.Fatalf("broker did not shut down cleanly: %v", err)
	}
	b, err := startBrokerProcess(env.kubeconfigs["onboarding"])
	if err != nil {
		t.Fatal(err)
	}
	env.broker = b
	hh.base = b.url
	lo = hh.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=" + delOp})
	if lo.status != 200 || lo.str("state") != "succeeded" {
		t.Fatalf("last_operation after the restart: %s, want 200 succeeded", lo)
	}
	poll(t, b.url, call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=" + delOp},
		3*ttl, "instance 410", func(r reply) bool { return r.status == 410 })
	hh.expect(hh.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, true)}), 410, "deprovision again")
	hh.expect(hh.do(call{method: "GET", path: instancePath(id)}), 404, "fetch after deletion")
	waitNamespaceDeleted(t, sf.InstanceNamespace(id))
}

// waitNamespaceDeleted waits until the namespace is gone or terminating
// (the test API server runs no namespace controller to finish it).
func waitNamespaceDeleted(t *testing.T, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ns := &corev1.Namespace{}
		err := env.onboarding.Client.Get(ctx, client.ObjectKey{Name: name}, ns)
		return apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil), nil
	})
	if err != nil {
		t.Errorf("namespace %s was not deleted with its instance", name)
	}
}

// TestSyncLifecycle runs a synchronous plan through its whole life: every
// request answers the outcome itself.
func TestSyncLifecycle(t *testing.T) {
	b := setup(t)
	hh := h{t: t, base: b.url}
	const id, bid = "sync-lifecycle", "sync-lifecycle-binding"

	r := hh.expect(hh.provision(id, planSmall, obj{"size": 1}, false), 201, "provision")
	if r.str("dashboard_url") == "" || r.str("operation") != "" {
		t.Errorf("provision answered %s", r)
	}
	hh.expect(hh.do(call{method: "GET", path: instancePath(id)}), 200, "fetch")
	hh.expect(hh.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync", "parameters": obj{"size": 4}}}), 200, "update")
	if got := field(hh.do(call{method: "GET", path: instancePath(id)}).body, "parameters", "size"); got != 4.0 {
		t.Errorf("size after the update = %v", got)
	}
	r = hh.expect(hh.bind(id, bid, planSmall, nil, false), 201, "bind")
	if field(r.body, "credentials", "password") == nil {
		t.Errorf("bind answered %s", r)
	}
	hh.expect(hh.do(call{method: "GET", path: bindingPath(id, bid)}), 200, "fetch binding")
	hh.expect(hh.do(call{method: "DELETE", path: bindingPath(id, bid), query: deleteQuery(planSmall, false)}), 200, "unbind")
	hh.expect(hh.do(call{method: "DELETE", path: bindingPath(id, bid), query: deleteQuery(planSmall, false)}), 410, "unbind again")
	hh.expect(hh.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planSmall, false)}), 200, "deprovision")
	hh.expect(hh.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planSmall, false)}), 410, "deprovision again")
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*testTombstoneTTL, true, func(ctx context.Context) (bool, error) {
		err := env.onboarding.Client.Get(ctx, sf.InstanceKey(id), &osbv1alpha1.SFServiceInstance{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("the instance's tombstone was not released")
	}
}

// TestSampleCatalogLifecycle serves the inter-operator's sample catalog
// (examples/catalog, issue #5) and runs its plan "small", a synchronous
// plan, through provision, update, bind, unbind and deprovision, with the
// plan's own parameter schema enforced. The sample catalog has no
// asynchronous plan; TestAsyncLifecycle covers those with the test catalog.
func TestSampleCatalogLifecycle(t *testing.T) {
	b := setup(t)
	hh := h{t: t, base: b.url}
	const (
		service = "3c8ac0a4-4e0b-4bb4-9a31-5d2f0e6b7a10"
		small   = "8f0c6f36-2b71-4c65-8a7e-2a4f7c1d9b20"
		id, bid = "6d1f8a52-0c3e-4b7a-9e21-4f5a6b7c8d90", "7e2a9b63-1d4f-4c8b-8f32-5a6b7c8d9e01"
	)
	cat := hh.expect(hh.do(call{method: "GET", path: "/v2/catalog"}), 200, "catalog")
	var plans []string
	for _, s := range cat.body["services"].([]any) {
		if field(s, "id") == service {
			for _, p := range field(s, "plans").([]any) {
				plans = append(plans, field(p, "name").(string))
			}
		}
	}
	if len(plans) != 2 {
		t.Fatalf("sample offering served with plans %v, want small and medium-helm", plans)
	}
	body := func(params obj) obj {
		return obj{"service_id": service, "plan_id": small, "organization_guid": "org", "space_guid": "space",
			"context": obj{"platform": "kubernetes", "namespace": "team-a"}, "parameters": params}
	}
	hh.expect(hh.do(call{method: "PUT", path: instancePath(id), body: body(obj{"cpu": "lots"})}), 400, "provision with a cpu the schema refuses")
	hh.expect(hh.do(call{method: "PUT", path: instancePath(id), body: body(obj{"cpu": "1", "pods": 5})}), 201, "provision")
	hh.expect(hh.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": service, "parameters": obj{"pods": 20}}}), 200, "update")
	hh.expect(hh.do(call{method: "PUT", path: bindingPath(id, bid), body: obj{"service_id": service, "plan_id": small}}), 201, "bind")
	hh.expect(hh.do(call{method: "GET", path: bindingPath(id, bid)}), 200, "fetch binding")
	q := "service_id=" + service + "&plan_id=" + small
	hh.expect(hh.do(call{method: "DELETE", path: bindingPath(id, bid), query: q}), 200, "unbind")
	hh.expect(hh.do(call{method: "DELETE", path: instancePath(id), query: q}), 200, "deprovision")
}

// TestGracefulShutdown stops a broker while a synchronous provision waits
// for the provisioner: the request still gets its answer (201, once the
// provisioner finishes during the shutdown), and the broker exits cleanly.
func TestGracefulShutdown(t *testing.T) {
	setup(t)
	b, err := startBrokerProcess(env.kubeconfigs["onboarding"])
	if err != nil {
		t.Fatal(err)
	}
	const id = "graceful-shutdown"
	answer := make(chan reply, 1)
	go func() {
		answer <- do(t, b.url, call{method: "PUT", path: instancePath(id), body: provisionBody(planSmall, obj{"hold": true})})
	}()
	// Wait until the request is recorded and waiting, then stop.
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		inst := &osbv1alpha1.SFServiceInstance{}
		err := env.onboarding.Client.Get(ctx, sf.InstanceKey(id), inst)
		return err == nil && inst.Status.State == osbv1alpha1.StateInProgress, nil
	})
	if err != nil {
		t.Fatal("the provision request did not reach the provisioner")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- b.stop() }()
	time.Sleep(300 * time.Millisecond)
	releaseInstance(t, id)
	select {
	case r := <-answer:
		if r.status != 201 {
			t.Errorf("in-flight provision during the shutdown: %s, want 201", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the in-flight request got no answer")
	}
	if err := <-stopped; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// proxy forwards TCP connections to an API server and can be cut, to play
// an API server outage for one broker only.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	p.serve(ln)
	return p, nil
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *proxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

// cut refuses new connections and breaks the open ones.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// restore accepts connections again on the same address.
func (p *proxy) restore() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// TestAPIServerOutage cuts a broker off its onboarding API server: requests
// that need the API server answer 503 with a description and change
// nothing, last_operation keeps answering from the cache, and once the API
// server is reachable again the broker works on without a restart.
func TestAPIServerOutage(t *testing.T) {
	setup(t)
	u, err := url.Parse(env.onboarding.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.cut()
	kubeconfig, err := writeKubeconfig(t.TempDir(), "https://"+p.addr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := startBrokerProcess(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.stop() }()
	hh := h{t: t, base: b.url}
	const before, during = "outage-before", "outage-during"
	hh.ready(before, planSmall, nil)

	p.cut()
	r := hh.do(call{method: "PUT", path: instancePath(during), body: provisionBody(planSmall, nil)})
	if r.status != 503 || r.str("description") == "" {
		t.Errorf("provision during the outage: %s, want 503 with a description", r)
	}
	if r := hh.do(call{method: "DELETE", path: instancePath(before), query: deleteQuery(planSmall, false)}); r.status != 503 {
		t.Errorf("deprovision during the outage: %s, want 503", r)
	}
	if r := hh.do(call{method: "GET", path: instancePath(before) + "/last_operation", query: "operation=create-1"}); r.status != 200 || r.str("state") != "succeeded" {
		t.Errorf("last_operation during the outage (from the cache): %s", r)
	}
	// Nothing was written.
	if err := env.onboarding.Client.Get(context.Background(), sf.InstanceKey(during), &osbv1alpha1.SFServiceInstance{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused provision left an object behind: %v", err)
	}
	if inst := instance(t, before); inst.DeletionTimestamp != nil || inst.Status.State != osbv1alpha1.StateSucceeded {
		t.Errorf("the refused deprovision changed the instance: deleting %v, state %q", inst.DeletionTimestamp != nil, inst.Status.State)
	}

	if err := p.restore(); err != nil {
		t.Fatal(err)
	}
	poll(t, b.url, call{method: "PUT", path: instancePath(during), body: provisionBody(planSmall, nil)}, 60*time.Second,
		"provision after the outage", func(r reply) bool { return r.status == 201 || r.status == 200 })
	hh.expect(hh.do(call{method: "DELETE", path: instancePath(before), query: deleteQuery(planSmall, false)}), 200, "deprovision after the outage")
	// The cache caught up: a new operation is visible through it.
	r = hh.expect(hh.do(call{method: "PATCH", path: instancePath(during), query: "accepts_incomplete=true",
		body: obj{"service_id": "svc-sync", "parameters": obj{"size": 3}}}), 200, "update after the outage")
	hh.awaitInstance(during, "update-2", "succeeded")
	if errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
