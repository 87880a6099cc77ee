package broker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// parallelRequests is how many requests each case of TestConcurrentPuts
// sends at once (issue #14: 50 parallel PUTs of one id).
const parallelRequests = 50

// burst sends the calls all at once, each from its own goroutine released
// by one signal, and returns the replies in the order of the calls.
func burst(t *testing.T, base string, calls []call) []reply {
	t.Helper()
	replies := make([]reply, len(calls))
	errs := make([]error, len(calls))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i], errs[i] = send(base, c)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d of the burst: %v", i, err)
		}
	}
	return replies
}

// statusCounts counts the replies by status, for failure messages and
// assertions.
func statusCounts(replies []reply) map[int]int {
	n := map[int]int{}
	for _, r := range replies {
		n[r.status]++
	}
	return n
}

// someWith returns a reply with the status, to show in a failure message.
func someWith(replies []reply, status int) string {
	for _, r := range replies {
		if r.status == status {
			return r.String()
		}
	}
	return "none"
}

// storedInstances counts the SFServiceInstances of id, in every namespace.
func storedInstances(t *testing.T, id string) []osbv1alpha1.SFServiceInstance {
	t.Helper()
	list := &osbv1alpha1.SFServiceInstanceList{}
	if err := env.onboarding.Client.List(context.Background(), list); err != nil {
		t.Fatalf("list instances: %v", err)
	}
	var out []osbv1alpha1.SFServiceInstance
	for _, inst := range list.Items {
		if inst.Spec.InstanceID == id {
			out = append(out, inst)
		}
	}
	return out
}

// storedBindings counts the SFServiceBindings of bid, in every namespace.
func storedBindings(t *testing.T, bid string) []osbv1alpha1.SFServiceBinding {
	t.Helper()
	list := &osbv1alpha1.SFServiceBindingList{}
	if err := env.onboarding.Client.List(context.Background(), list); err != nil {
		t.Fatalf("list bindings: %v", err)
	}
	var out []osbv1alpha1.SFServiceBinding
	for _, b := range list.Items {
		if b.Spec.ID == bid {
			out = append(out, b)
		}
	}
	return out
}

// TestConcurrentPuts sends 50 PUTs of one instance or binding id at once
// over real HTTP and checks that exactly one object is stored and that
// every answer is the spec's: identical requests for an asynchronous plan
// all get 202 with the one operation (a re-sent PUT of work in progress);
// for a synchronous plan one gets 201 (it provisioned) and the others 200
// (identical, provisioned by the time they are answered); requests that
// differ (plan or parameters) have one winner and 409 for every other.
func TestConcurrentPuts(t *testing.T) {
	b := setup(t)
	hh := h{t: t, base: b.url}
	same := func(c call) []call {
		calls := make([]call, parallelRequests)
		for i := range calls {
			calls[i] = c
		}
		return calls
	}

	t.Run("IdenticalAsyncProvisions", func(t *testing.T) {
		const id = "concurrent-async"
		replies := burst(t, b.url, same(call{method: "PUT", path: instancePath(id), query: "accepts_incomplete=true",
			body: provisionBody(planAsync, obj{"hold": true})}))
		if n := statusCounts(replies); n[202] != parallelRequests {
			t.Fatalf("statuses %v, want %d × 202 (a re-sent PUT of a provisioning in progress is 202); e.g. %s",
				n, parallelRequests, someWith(replies, firstOther(n, 202)))
		}
		for _, r := range replies {
			if r.str("operation") != "create-1" {
				t.Fatalf("operation %q, want every request to get the one operation create-1: %s", r.str("operation"), r)
			}
		}
		insts := storedInstances(t, id)
		if len(insts) != 1 {
			t.Fatalf("%d SFServiceInstances of %s stored, want 1", len(insts), id)
		}
		if op := insts[0].Annotations[sf.AnnotationOperation]; op != "create-1" {
			t.Errorf("stored operation %q, want create-1: a joining request started another operation", op)
		}
		releaseInstance(t, id)
		hh.awaitInstance(id, "create-1", "succeeded")
	})

	t.Run("IdenticalSyncProvisions", func(t *testing.T) {
		const id = "concurrent-sync"
		replies := burst(t, b.url, same(call{method: "PUT", path: instancePath(id), body: provisionBody(planSmall, obj{"size": 2})}))
		if n := statusCounts(replies); n[201] != 1 || n[200] != parallelRequests-1 {
			t.Fatalf("statuses %v, want one 201 (the provisioning request) and %d × 200 (identical, provisioned); e.g. %s",
				n, parallelRequests-1, someWith(replies, firstOther(n, 201, 200)))
		}
		if insts := storedInstances(t, id); len(insts) != 1 || insts[0].Annotations[sf.AnnotationOperation] != "create-1" {
			t.Fatalf("%d SFServiceInstances of %s stored, want 1 with operation create-1", len(insts), id)
		}
	})

	t.Run("ConflictingProvisions", func(t *testing.T) {
		const id = "concurrent-conflict"
		calls := make([]call, parallelRequests)
		for i := range calls {
			// Every request differs from every other: half name another
			// plan, each sends other parameters.
			plan := planAsync
			if i%2 == 1 {
				plan = planOther
			}
			calls[i] = call{method: "PUT", path: instancePath(id), query: "accepts_incomplete=true",
				body: provisionBody(plan, obj{"n": i})}
		}
		replies := burst(t, b.url, calls)
		n := statusCounts(replies)
		if n[202] != 1 || n[409] != parallelRequests-1 {
			t.Fatalf("statuses %v, want exactly one 202 and %d × 409 Conflict; e.g. %s",
				n, parallelRequests-1, someWith(replies, firstOther(n, 202, 409)))
		}
		winner := -1
		for i, r := range replies {
			if r.status == 202 {
				winner = i
			}
		}
		insts := storedInstances(t, id)
		if len(insts) != 1 {
			t.Fatalf("%d SFServiceInstances of %s stored, want 1", len(insts), id)
		}
		want := calls[winner].body.(obj)
		if got := insts[0].Spec.PlanID; got != want["plan_id"] {
			t.Errorf("stored plan %q, want the winner's %q", got, want["plan_id"])
		}
		if got, wantParams := string(insts[0].Spec.Parameters.Raw), fmt.Sprintf(`{"n":%d}`, winner); got != wantParams {
			t.Errorf("stored parameters %s, want the winner's %s", got, wantParams)
		}
	})

	hh.ready("concurrent-bind-sync", planSmall, nil)
	hh.ready("concurrent-bind-async", planAsync, nil)

	t.Run("IdenticalSyncBinds", func(t *testing.T) {
		const id, bid = "concurrent-bind-sync", "concurrent-bind-sync-b"
		replies := burst(t, b.url, same(call{method: "PUT", path: bindingPath(id, bid), body: bindBody(planSmall, obj{"readOnly": true})}))
		if n := statusCounts(replies); n[201] != 1 || n[200] != parallelRequests-1 {
			t.Fatalf("statuses %v, want one 201 (the binding request) and %d × 200 (identical, created); e.g. %s",
				n, parallelRequests-1, someWith(replies, firstOther(n, 201, 200)))
		}
		users := map[any]bool{}
		for _, r := range replies {
			users[field(r.body, "credentials", "password")] = true
		}
		if len(users) != 1 {
			t.Errorf("the answers carry %d different credentials, want the one binding's", len(users))
		}
		if bnds := storedBindings(t, bid); len(bnds) != 1 {
			t.Fatalf("%d SFServiceBindings of %s stored, want 1", len(bnds), bid)
		}
	})

	t.Run("IdenticalAsyncBinds", func(t *testing.T) {
		const id, bid = "concurrent-bind-async", "concurrent-bind-async-b"
		replies := burst(t, b.url, same(call{method: "PUT", path: bindingPath(id, bid), query: "accepts_incomplete=true",
			body: bindBody(planAsync, obj{"hold": true})}))
		if n := statusCounts(replies); n[202] != parallelRequests {
			t.Fatalf("statuses %v, want %d × 202; e.g. %s", n, parallelRequests, someWith(replies, firstOther(n, 202)))
		}
		for _, r := range replies {
			if r.str("operation") != "create-1" {
				t.Fatalf("operation %q, want every request to get create-1: %s", r.str("operation"), r)
			}
		}
		if bnds := storedBindings(t, bid); len(bnds) != 1 {
			t.Fatalf("%d SFServiceBindings of %s stored, want 1", len(bnds), bid)
		}
		release(t, sf.BindingKey(id, bid), &osbv1alpha1.SFServiceBinding{})
		hh.awaitBindingSucceeded(id, bid, "create-1")
	})

	t.Run("ConflictingBinds", func(t *testing.T) {
		const id, bid = "concurrent-bind-sync", "concurrent-bind-conflict"
		calls := make([]call, parallelRequests)
		for i := range calls {
			// Every request differs from every other: its application,
			// and half of them the parameters.
			body := bindBody(planSmall, obj{"readOnly": i%2 == 1})
			body["bind_resource"] = obj{"app_guid": fmt.Sprintf("app-%d", i)}
			calls[i] = call{method: "PUT", path: bindingPath(id, bid), body: body}
		}
		replies := burst(t, b.url, calls)
		if n := statusCounts(replies); n[201] != 1 || n[409] != parallelRequests-1 {
			t.Fatalf("statuses %v, want exactly one 201 and %d × 409 Conflict; e.g. %s",
				n, parallelRequests-1, someWith(replies, firstOther(n, 201, 409)))
		}
		bnds := storedBindings(t, bid)
		if len(bnds) != 1 {
			t.Fatalf("%d SFServiceBindings of %s stored, want 1", len(bnds), bid)
		}
		for i, r := range replies {
			if want := fmt.Sprintf("app-%d", i); r.status == 201 && bnds[0].Spec.AppGUID != want {
				t.Errorf("stored app_guid %q, want the winner's %q", bnds[0].Spec.AppGUID, want)
			}
		}
	})
}

// firstOther returns the lowest status counted in n that is none of want,
// or want[0] when there is none.
func firstOther(n map[int]int, want ...int) int {
	var others []int
	for s := range n {
		if !slices.Contains(want, s) {
			others = append(others, s)
		}
	}
	if len(others) == 0 {
		return want[0]
	}
	slices.Sort(others)
	return others[0]
}
