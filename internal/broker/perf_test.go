package broker_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/app"
	"github.com/marketplane/marketplane/internal/broker/kubestore"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// apiCounter counts the requests a broker sends to the onboarding API
// server, by method and path; watches and lists (the informers') aside.
type apiCounter struct {
	mu       sync.Mutex
	requests []string
}

type countingTransport struct {
	next http.RoundTripper
	c    *apiCounter
}

// RoundTrip implements http.RoundTripper.
func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if q.Get("watch") != "true" {
		t.c.mu.Lock()
		t.c.requests = append(t.c.requests, r.Method+" "+r.URL.Path)
		t.c.mu.Unlock()
	}
	return t.next.RoundTrip(r)
}

// mark returns the number of requests counted so far.
func (c *apiCounter) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

// since returns the requests counted after mark that concern the namespace
// ns (its own path, or a namespace create: the broker's reaper, working
// for other tests' tombstones meanwhile, never creates one).
func (c *apiCounter) since(mark int, ns string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.requests[mark:] {
		if strings.Contains(r, "/namespaces/"+ns+"/") || strings.HasSuffix(r, "/namespaces/"+ns) || r == "POST /api/v1/namespaces" {
			out = append(out, r)
		}
	}
	return out
}

// count counts the requests that are pattern, or start with it when it
// ends with a slash.
func count(requests []string, pattern string) int {
	n := 0
	for _, r := range requests {
		if r == pattern || (strings.HasSuffix(pattern, "/") && strings.HasPrefix(r, pattern)) {
			n++
		}
	}
	return n
}

// TestWatchDrivenBroker runs a broker whose safety re-check (a minute) and
// sync timeout (30 s) are far longer than the test waits, with its
// requests to the onboarding API server counted:
//   - a synchronous provision, bind, unbind and deprovision each answer
//     within seconds, so the wait for the provisioner ends on the
//     informer's notification, not on a poll;
//   - provision and bind read nothing from the API server but the bind
//     response Secret: the cache answers, and a new id is created without
//     a read (no GET of the instance, the binding or the namespace);
//   - a deprovision with accepts_incomplete=true of a synchronous plan is
//     202 at once while the provisioner still holds the deletion, and
//     last_operation reports it in progress, then succeeded.
func TestWatchDrivenBroker(t *testing.T) {
	setup(t)
	counter := &apiCounter{}
	b, err := startBrokerProcess(env.kubeconfigs["onboarding"], func(o *app.Options) {
		o.RecheckInterval = time.Minute
		o.SyncTimeout = 30 * time.Second
		o.WrapOnboardingTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, c: counter} }
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.stop(); err != nil {
			t.Errorf("stop the broker: %v", err)
		}
	})
	hh := h{t: t, base: b.url}
	// The bound is far below the re-check interval and the sync timeout,
	// generous for a loaded machine.
	const bound = 10 * time.Second
	timed := func(what string, status int, req func() reply) (reply, time.Duration) {
		t.Helper()
		start := time.Now()
		r := hh.expect(req(), status, what)
		if d := time.Since(start); d > bound {
			t.Fatalf("%s took %s: far beyond what it needs (the re-check is %s, the sync timeout 30s): a waiting request must wake on the cache's change notification and a deprovision that accepts an asynchronous answer must not wait", what, d, time.Minute)
		}
		return r, time.Since(start)
	}

	t.Run("sync requests wake on notifications and read only the Secret", func(t *testing.T) {
		hh := h{t: t, base: b.url}
		const id, bid = "watch-sync", "watch-sync-b"
		ns := sf.InstanceKey(id).Namespace
		instPath := "/apis/osb.servicefabrik.io/v1alpha1/namespaces/" + ns + "/sfserviceinstances/" + sf.InstanceKey(id).Name
		bindPath := "/apis/osb.servicefabrik.io/v1alpha1/namespaces/" + ns + "/sfservicebindings/" + sf.BindingKey(id, bid).Name
		m := counter.mark()
		_, d := timed("sync provision", 201, func() reply { return hh.provision(id, planSmall, nil, false) })
		reqs := counter.since(m, ns)
		t.Logf("provision: %s, API requests %v", d, reqs)
		checkReads(t, "provision", reqs, instPath, "GET /api/v1/namespaces/"+ns)

		m = counter.mark()
		_, d = timed("sync bind", 201, func() reply { return hh.bind(id, bid, planSmall, nil, false) })
		reqs = counter.since(m, ns)
		t.Logf("bind: %s, API requests %v", d, reqs)
		checkReads(t, "bind", reqs, bindPath, "GET "+instPath, "GET /api/v1/namespaces/"+ns)
		if n := count(reqs, "GET /api/v1/namespaces/"+ns+"/secrets/"); n != 1 {
			t.Errorf("bind read the response Secret %d times (%v); want once", n, reqs)
		}
		// The binding carries the provisioner's finalizer from its
		// create on, which spares the provisioner a write.
		stored := &osbv1alpha1.SFServiceBinding{}
		if err := env.onboarding.Client.Get(context.Background(), sf.BindingKey(id, bid), stored); err != nil {
			t.Fatalf("get binding: %v", err)
		}
		if !slices.Contains(stored.Finalizers, osbv1alpha1.FinalizerProvisioner) || !slices.Contains(stored.Finalizers, osbv1alpha1.FinalizerBroker) {
			t.Errorf("binding finalizers %v; want the broker's and the provisioner's", stored.Finalizers)
		}

		timed("sync unbind", 200, func() reply {
			return hh.do(call{method: "DELETE", path: bindingPath(id, bid), query: deleteQuery(planSmall, false)})
		})
		timed("sync deprovision", 200, func() reply {
			return hh.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planSmall, false)})
		})
	})

	t.Run("deprovision with accepts_incomplete answers 202 at once", func(t *testing.T) {
		hh := h{t: t, base: b.url}
		const id = "watch-deprovision-held"
		hh.ready(id, planSmall, obj{"holdDelete": true})
		r, d := timed("deprovision of a held deletion", 202, func() reply {
			return hh.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planSmall, true)})
		})
		t.Logf("deprovision answered %s in %s", r, d)
		op := r.str("operation")
		if op != "delete-2" {
			t.Fatalf("deprovision: operation %q, want delete-2", op)
		}
		lo := hh.expect(hh.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=" + op}), 200, "last_operation")
		if lo.str("state") != "in progress" {
			t.Errorf("last_operation of the held deletion: %s, want in progress", lo)
		}
		releaseInstance(t, id)
		hh.awaitInstance(id, op, "succeeded")
	})
}

// checkReads fails the test when a provision or bind asked the API server
// more than it must: never the forbidden requests (the instance, the
// namespace), never the object before creating it, and after creating it
// neither a status write (an empty state means in_queue, and the label
// lastoperation records it) nor a read (the cache answers the wait).
func checkReads(t *testing.T, what string, reqs []string, objPath string, forbidden ...string) {
	t.Helper()
	for _, f := range forbidden {
		if n := count(reqs, f); n != 0 {
			t.Errorf("%s sent %s %d times (%v); want none: the cache answers", what, f, n, reqs)
		}
	}
	created := false
	for _, r := range reqs {
		switch {
		case strings.HasPrefix(r, "POST ") && strings.HasPrefix(objPath, strings.TrimPrefix(r, "POST ")+"/"):
			created = true
		case r == "GET "+objPath && !created:
			t.Errorf("%s read the object before creating it (%v); a new id is created without a read", what, reqs)
		case r == "GET "+objPath:
			t.Errorf("%s read the object after creating it (%v); the cache answers the wait", what, reqs)
		case r == "PUT "+objPath+"/status":
			t.Errorf("%s wrote the status of the object it created (%v); an empty state means in_queue, the write carries nothing", what, reqs)
		}
	}
	if !created {
		t.Errorf("%s did not create %s (%v)", what, objPath, reqs)
	}
}

// laggingTransport hands over what a watch response brings lag after it
// came: the broker's informers see each change that much later than the
// API server made it, as on a loaded cluster.
type laggingTransport struct {
	next http.RoundTripper
	lag  *atomic.Int64 // nanoseconds
}

// RoundTrip implements http.RoundTripper.
func (t laggingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil && r.URL.Query().Get("watch") == "true" {
		resp.Body = laggingBody{ReadCloser: resp.Body, lag: t.lag}
	}
	return resp, err
}

type laggingBody struct {
	io.ReadCloser
	lag *atomic.Int64
}

// Read implements io.Reader: it hands over what arrived lag after it
// arrived. The wait stands for a slow watch stream.
func (b laggingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	time.Sleep(time.Duration(b.lag.Load()))
	return n, err
}

// TestLastOperationWaitsForTheCache polls last_operation right after the
// 202 of an asynchronous provision, through a broker whose informers lag:
//   - while the lag (50ms) is well within kubestore.CacheCatchUp, the poll waits
//     for the cache to bring the broker's own write, and asks the API
//     server nothing;
//   - when the watch stalls for longer, the poll reads the instance from
//     the API server once the bound passed, and answers all the same.
func TestLastOperationWaitsForTheCache(t *testing.T) {
	setup(t)
	counter := &apiCounter{}
	lag := &atomic.Int64{}
	lag.Store(int64(50 * time.Millisecond))
	b, err := startBrokerProcess(env.kubeconfigs["onboarding"], func(o *app.Options) {
		o.WrapOnboardingTransport = func(rt http.RoundTripper) http.RoundTripper {
			return countingTransport{next: laggingTransport{next: rt, lag: lag}, c: counter}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lag.Store(0)
		if err := b.stop(); err != nil {
			t.Errorf("stop the broker: %v", err)
		}
	})
	hh := h{t: t, base: b.url}
	poll := func(id string) (reply, []string, time.Duration) {
		t.Helper()
		ns := sf.InstanceKey(id).Namespace
		r := hh.expect(hh.provision(id, planAsync, nil, true), 202, "provision "+id)
		m := counter.mark()
		start := time.Now()
		lo := hh.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=" + r.str("operation")})
		d := time.Since(start)
		if lo.status != 200 || (lo.str("state") != "in progress" && lo.str("state") != "succeeded") {
			t.Fatalf("last_operation of %s right after the 202: %s, want 200 in progress or succeeded", id, lo)
		}
		return lo, counter.since(m, ns), d
	}
	instGet := func(id string) string {
		k := sf.InstanceKey(id)
		return "GET /apis/osb.servicefabrik.io/v1alpha1/namespaces/" + k.Namespace + "/sfserviceinstances/" + k.Name
	}

	// The namespace check (an instance is served only from the broker's
	// namespace) never reads the API server for a namespace this broker
	// created, however far its cache is behind.
	nsGet := func(id string) string { return "GET /api/v1/namespaces/" + sf.InstanceKey(id).Namespace }

	const caughtUp = "lastop-cache"
	lo, reqs, d := poll(caughtUp)
	t.Logf("last_operation behind a 50ms watch lag: %s in %s, API requests %v", lo, d, reqs)
	if n := count(reqs, instGet(caughtUp)); n != 0 {
		t.Errorf("last_operation read the instance from the API server %d times (%v); the cache, 50ms behind, must answer once it brought the broker's own write", n, reqs)
	}
	if n := count(reqs, nsGet(caughtUp)); n != 0 {
		t.Errorf("last_operation read the instance's namespace from the API server %d times (%v); the broker created it", n, reqs)
	}

	lag.Store(int64(2 * kubestore.CacheCatchUp))
	const stalled = "lastop-stalled"
	lo, reqs, d = poll(stalled)
	t.Logf("last_operation behind a stalled watch: %s in %s, API requests %v", lo, d, reqs)
	if n := count(reqs, instGet(stalled)); n != 1 {
		t.Errorf("last_operation behind a stalled watch read the instance %d times (%v); want once, after the cache's %s", n, reqs, kubestore.CacheCatchUp)
	}
	if n := count(reqs, nsGet(stalled)); n != 0 {
		t.Errorf("last_operation behind a stalled watch read the instance's namespace %d times (%v); the broker created it", n, reqs)
	}
	if d < kubestore.CacheCatchUp {
		t.Errorf("last_operation behind a stalled watch answered after %s; it must wait %s for the cache first", d, kubestore.CacheCatchUp)
	}
	lag.Store(0)
	hh.awaitInstance(caughtUp, "create-1", "succeeded")
	hh.awaitInstance(stalled, "create-1", "succeeded")
}
