package broker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// TestAttackIDs is issue #32's attack on instance and binding ids, sent to
// every OSB endpoint of the broker over real HTTP: path traversal (raw dot
// segments, "..%2F", "%2F"), unicode (homoglyphs, both normalisations of
// one letter, uppercase), ids of 60, 61, 63, 64, 300 and 1024 bytes, and ids
// that differ only by case. Each id is refused with a 4xx or stored under
// its own safe Kubernetes name (sf.ObjectName) with the full id in the
// spec, never reaching another object. Two ids that map to the same name (an
// id that is the hash another id is stored under) are told apart: the
// second gets 409 on provision and bind, 404 or 410 elsewhere, and the
// first is not touched. TestIDCharacters covers NUL ("%00"), other control
// characters, bidirectional overrides and bytes that are not UTF-8 (all
// 400); this test does not repeat them.
func TestAttackIDs(t *testing.T) {
	b := setup(t)
	hh := h{t: t, base: b.url}
	run := randomSuffix(t)
	victim := "victim-" + run
	hh.ready(victim, planSmall, nil)
	hh.bound(victim, "victim-binding-"+run, planSmall, nil)
	before := snapshot(t, victim, "victim-binding-"+run)

	t.Run("RawDotSegments", func(t *testing.T) {
		// Paths that URL normalisation would turn into another instance's
		// or binding's path. None reaches an endpoint.
		for _, p := range []string{
			"/v2/service_instances/" + victim + "/..",
			"/v2/service_instances/other/../" + victim,
			"/v2/service_instances/./" + victim,
			"/v2/service_instances/..",
			"/v2/service_instances/%2E%2E",
			"/v2/service_instances/" + victim + "/service_bindings/..",
			"/v2/service_instances/" + victim + "/service_bindings/x/../victim-binding-" + run,
			"/v2/service_instances/x/service_bindings/../../" + victim + "/service_bindings/victim-binding-" + run,
			"/v2/service_instances/" + victim + "/service_bindings/%2e%2E/last_operation",
		} {
			for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				var body any
				if m == http.MethodPut || m == http.MethodPatch {
					body = provisionBody(planSmall, nil)
				}
				r := hh.do(call{method: m, path: p, query: deleteQuery(planSmall, false), body: body})
				if r.status < 400 || r.status >= 500 || r.str("description") == "" {
					t.Errorf("%s %s: got %s; want a 4xx with a description", m, p, r)
				}
			}
		}
	})

	t.Run("DotSegmentsInIDs", func(t *testing.T) {
		// Ids whose percent-encoded slashes enclose a dot segment or an
		// empty one: decoded, the path is not canonical, so the id could
		// never address its object. 400 naming the id on every endpoint.
		for name, id := range map[string]string{
			"DotDotSlash":   "../" + victim,
			"Traversal":     "../../" + sf.InstanceNamespace(victim) + "/" + victim,
			"InnerDotDot":   victim + "/../" + victim,
			"DotSlash":      "./" + victim,
			"TrailingSlash": victim + "/",
			"DoubleSlash":   "a//" + victim,
		} {
			for _, ep := range everyEndpoint() {
				fields := map[string][2]string{"instance_id": {id, "b-" + run}}
				if ep.binding {
					fields["binding_id"] = [2]string{victim, id}
				}
				for field, ids := range fields {
					r := hh.do(call{method: ep.method, path: ep.path(ids[0], ids[1]), query: ep.query, body: ep.body})
					if r.status != 400 || !strings.Contains(r.str("description"), field) {
						t.Errorf("%s: %s %s: got %s; want 400 naming %s", name, ep.method, ep.path(ids[0], ids[1]), r, field)
					}
				}
			}
		}
	})

	// Ids that are valid but odd: each goes through every endpoint, as
	// instance id and as binding id, and must land on its own object.
	odd := map[string]string{
		"EncodedSlash":     "a/b-" + run,
		"EncodedSlashes":   "sf-" + victim + "/" + victim,
		"Uppercase":        "Victim-" + run,
		"UppercaseAll":     strings.ToUpper(victim),
		"Homoglyph":        "v\u0456ctim-" + run, // CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I
		"NFC":              "caf\u00e9-" + run,
		"NFD":              "cafe\u0301-" + run,
		"Length60":         pad(run, 60),
		"Length61":         pad(run, 61),
		"Length63":         pad(run, 63),
		"Length64":         pad(run, 64),
		"Length300":        pad(run, 300),
		"Length1024":       pad(run, 1024),
		"UppercaseLength":  strings.ToUpper(pad(run, 40)),
		"DNSLabelWithDots": "a.b.c-" + run,
	}
	var mu sync.Mutex
	stored := map[client.ObjectKey]string{}
	t.Run("OddIDs", func(t *testing.T) {
		for name, id := range odd {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				key := oddLifecycle(t, hh, id)
				mu.Lock()
				defer mu.Unlock()
				if other, ok := stored[key]; ok {
					t.Errorf("ids %q and %q are both stored as %s", truncateID(other), truncateID(id), key)
				}
				stored[key] = id
			})
		}
	})
	t.Run("LengthLimit", func(t *testing.T) {
		id := pad(run, 1025)
		for _, c := range []call{
			{method: http.MethodPut, path: instancePath(id), body: provisionBody(planSmall, nil)},
			{method: http.MethodGet, path: instancePath(id)},
			{method: http.MethodPut, path: bindingPath(victim, id), body: bindBody(planSmall, nil)},
		} {
			if r := hh.do(c); r.status != 400 || !strings.Contains(r.str("description"), "longer than") {
				t.Errorf("%s with a 1025-byte id: got %s; want 400 naming the limit", c.method, r)
			}
		}
	})

	t.Run("HashCollision", func(t *testing.T) {
		// An id that is not a DNS label is stored under its hash; an id
		// that IS that hash is stored under itself: the same name.
		first := "Collide-" + run
		second := sf.ObjectName(first)
		if sf.ObjectName(second) != second || sf.InstanceKey(first) != sf.InstanceKey(second) {
			t.Fatalf("the ids %q and %q do not share a name: the test is broken", first, second)
		}
		hh.ready(first, planSmall, nil)
		firstBefore := snapshot(t, first, "")
		collide(t, hh, first, second, "")

		// The other order: the plain id first, then the one hashing to it.
		plainFirst := sf.ObjectName("Collide-again-" + run)
		hh.ready(plainFirst, planSmall, nil)
		collide(t, hh, plainFirst, "Collide-again-"+run, "")

		// Bindings of one instance.
		bid := "Bind-" + run
		hh.bound(first, bid, planSmall, nil)
		collide(t, hh, first, "", sf.ObjectName(bid))
		if got := snapshot(t, first, ""); got.instance != firstBefore.instance {
			t.Errorf("the first instance changed: %s, was %s", got.instance, firstBefore.instance)
		}
		if got := bindingOf(t, first, bid); got.Spec.ID != bid || got.DeletionTimestamp != nil {
			t.Errorf("binding %q after the colliding requests: id %q, deleting %v", bid, got.Spec.ID, got.DeletionTimestamp != nil)
		}
	})

	// Nothing above reached the victim.
	if after := snapshot(t, victim, "victim-binding-"+run); after != before {
		t.Errorf("the victim changed: %+v, was %+v", after, before)
	}
}

// endpoint is one OSB endpoint that takes an id.
type endpoint struct {
	name, method string
	// path builds the request path from an instance and a binding id.
	path    func(id, bid string) string
	query   string
	body    any
	binding bool
}

// everyEndpoint returns the OSB endpoints that take an instance id, and
// those that take a binding id too.
func everyEndpoint() []endpoint {
	return []endpoint{
		{name: "provision", method: "PUT", path: func(id, _ string) string { return instancePath(id) }, body: provisionBody(planSmall, nil)},
		{name: "update", method: "PATCH", path: func(id, _ string) string { return instancePath(id) }, body: obj{"service_id": serviceOf(planSmall)}},
		{name: "fetch_instance", method: "GET", path: func(id, _ string) string { return instancePath(id) }},
		{name: "deprovision", method: "DELETE", path: func(id, _ string) string { return instancePath(id) }, query: deleteQuery(planSmall, false)},
		{name: "instance_last_operation", method: "GET", path: func(id, _ string) string { return instancePath(id) + "/last_operation" }},
		{name: "bind", method: "PUT", path: bindingPath, body: bindBody(planSmall, nil), binding: true},
		{name: "fetch_binding", method: "GET", path: bindingPath, binding: true},
		{name: "unbind", method: "DELETE", path: bindingPath, query: deleteQuery(planSmall, false), binding: true},
		{name: "binding_last_operation", method: "GET", path: func(id, bid string) string { return bindingPath(id, bid) + "/last_operation" }, binding: true},
	}
}

// oddLifecycle runs id through every endpoint, as instance id and as binding
// id: provision, fetch, update, last_operation, bind, fetch binding,
// binding last_operation, unbind, deprovision. It checks where the broker
// stored the objects and returns the instance's key.
func oddLifecycle(t *testing.T, hh h, id string) client.ObjectKey {
	t.Helper()
	hh = h{t: t, base: hh.base}
	steps := []struct {
		c    call
		want int
	}{
		{call{method: http.MethodPut, path: instancePath(id), body: provisionBody(planSmall, obj{"size": 1})}, 201},
		{call{method: http.MethodGet, path: instancePath(id)}, 200},
		{call{method: http.MethodPatch, path: instancePath(id), body: obj{"service_id": serviceOf(planSmall), "parameters": obj{"size": 2}}}, 200},
		{call{method: http.MethodGet, path: instancePath(id) + "/last_operation"}, 200},
		{call{method: http.MethodPut, path: bindingPath(id, id), body: bindBody(planSmall, nil)}, 201},
		{call{method: http.MethodGet, path: bindingPath(id, id)}, 200},
		{call{method: http.MethodGet, path: bindingPath(id, id) + "/last_operation"}, 200},
	}
	for _, s := range steps {
		if r := hh.do(s.c); r.status != s.want {
			t.Fatalf("%s %s: got %s; want %d", s.c.method, truncateID(s.c.path), r, s.want)
		}
	}
	key := sf.InstanceKey(id)
	if errs := validation.IsDNS1123Label(key.Name); len(errs) != 0 || len(key.Namespace) > validation.DNS1123LabelMaxLength {
		t.Errorf("instance %q is stored as %s: not a safe name (%v)", truncateID(id), key, errs)
	}
	inst := &osbv1alpha1.SFServiceInstance{}
	if err := env.onboarding.Client.Get(context.Background(), key, inst); err != nil {
		t.Fatalf("the instance of %q is not at %s: %v", truncateID(id), key, err)
	}
	if inst.Spec.InstanceID != id {
		t.Errorf("the instance at %s holds id %q, want %q", key, truncateID(inst.Spec.InstanceID), truncateID(id))
	}
	bnd := bindingOf(t, id, id)
	if bnd.Spec.ID != id || bnd.Spec.InstanceID != id {
		t.Errorf("the binding at %s holds ids %q/%q, want %q", sf.BindingKey(id, id), truncateID(bnd.Spec.InstanceID), truncateID(bnd.Spec.ID), truncateID(id))
	}
	for _, c := range []call{
		{method: http.MethodDelete, path: bindingPath(id, id), query: deleteQuery(planSmall, false)},
		{method: http.MethodDelete, path: instancePath(id), query: deleteQuery(planSmall, false)},
	} {
		if r := hh.do(c); r.status != 200 {
			t.Fatalf("%s %s: got %s; want 200", c.method, truncateID(c.path), r)
		}
	}
	return key
}

// collide sends, for the instance id other (or, when bid is set, the
// binding bid of owner), every request of the OSB API after owner's object
// holds the name other maps to: provision and bind get 409, the others 404
// or 410, and owner's object is not changed.
func collide(t *testing.T, hh h, owner, other, bid string) {
	t.Helper()
	before := snapshot(t, owner, "")
	var calls []struct {
		c     call
		wants []int
	}
	add := func(c call, wants ...int) {
		calls = append(calls, struct {
			c     call
			wants []int
		}{c, wants})
	}
	if bid == "" {
		add(call{method: http.MethodPut, path: instancePath(other), body: provisionBody(planSmall, nil)}, 409)
		add(call{method: http.MethodGet, path: instancePath(other)}, 404)
		add(call{method: http.MethodPatch, path: instancePath(other), body: obj{"service_id": serviceOf(planSmall), "parameters": obj{"size": 3}}}, 404)
		add(call{method: http.MethodGet, path: instancePath(other) + "/last_operation"}, 404, 410)
		add(call{method: http.MethodPut, path: bindingPath(other, "b-"+other), body: bindBody(planSmall, nil)}, 404)
		add(call{method: http.MethodDelete, path: instancePath(other), query: deleteQuery(planSmall, false)}, 410)
	} else {
		add(call{method: http.MethodPut, path: bindingPath(owner, bid), body: bindBody(planSmall, nil)}, 409)
		add(call{method: http.MethodGet, path: bindingPath(owner, bid)}, 404)
		add(call{method: http.MethodGet, path: bindingPath(owner, bid) + "/last_operation"}, 404, 410)
		add(call{method: http.MethodDelete, path: bindingPath(owner, bid), query: deleteQuery(planSmall, false)}, 410)
	}
	for _, x := range calls {
		r := hh.do(x.c)
		ok := false
		for _, w := range x.wants {
			ok = ok || r.status == w
		}
		if !ok || r.str("description") == "" && r.status != 410 {
			t.Errorf("%s %s (its name is %s's): got %s; want %v with a description", x.c.method, truncateID(x.c.path), truncateID(owner), r, x.wants)
		}
	}
	if after := snapshot(t, owner, ""); after.instance != before.instance {
		t.Errorf("instance %q changed after the colliding requests: %s, was %s", truncateID(owner), after.instance, before.instance)
	}
}

// state is what must not change of an instance and a binding an attack
// did not address: resourceVersion, generation, deletion.
type state struct{ instance, binding string }

func snapshot(t *testing.T, id, bid string) state {
	t.Helper()
	inst := instance(t, id)
	s := state{instance: inst.ResourceVersion + "/" + inst.Spec.InstanceID}
	if inst.DeletionTimestamp != nil {
		s.instance += "/deleting"
	}
	if bid != "" {
		b := bindingOf(t, id, bid)
		s.binding = b.ResourceVersion + "/" + b.Spec.ID
		if b.DeletionTimestamp != nil {
			s.binding += "/deleting"
		}
	}
	return s
}

func bindingOf(t *testing.T, id, bid string) *osbv1alpha1.SFServiceBinding {
	t.Helper()
	b := &osbv1alpha1.SFServiceBinding{}
	if err := env.onboarding.Client.Get(context.Background(), sf.BindingKey(id, bid), b); err != nil {
		if apierrors.IsNotFound(err) {
			t.Fatalf("no binding of %q at %s", truncateID(bid), sf.BindingKey(id, bid))
		}
		t.Fatal(err)
	}
	return b
}

// pad returns an id of n bytes: a DNS label made of prefix and "x"s.
func pad(prefix string, n int) string {
	return prefix + strings.Repeat("x", n-len(prefix))
}

// truncateID shortens long ids for messages.
func truncateID(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// randomSuffix returns a fresh lowercase suffix for ids, so that a test run
// again against the shared broker (-count=N) starts on ids of its own.
func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
