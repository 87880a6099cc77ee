package broker_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// TestIDCharacters sends instance and binding ids with NUL, other control
// characters, invisible format characters and bytes that are not UTF-8 to
// every endpoint that takes an id, over real HTTP, and checks that each is
// refused with 400 and a description naming the id, before anything is
// stored. Ids of printable characters outside ASCII stay usable.
func TestIDCharacters(t *testing.T) {
	b := setup(t)
	hh := h{t: t, base: b.url}
	const good = "ids-good-instance"
	hh.ready(good, planSmall, nil)

	bad := map[string]string{
		"NUL":          "ids-\x00-nul",
		"OnlyNUL":      "\x00",
		"SOH":          "ids-\x01",
		"Newline":      "ids-\nforged log line",
		"CarriageRet":  "ids-\r",
		"Tab":          "ids-\t",
		"Escape":       "ids-\x1b[31m",
		"DEL":          "ids-\x7f",
		"C1NextLine":   "ids-\u0085",
		"BidiOverride": "ids-\u202e",
		"ZeroWidth":    "ids-\u200b",
		"NotUTF8":      "ids-\xff\xfe",
		"Truncated":    "ids-\xe2\x82",
	}
	type endpoint struct {
		name, method string
		// path builds the request path from an instance and a binding id.
		path    func(id, bid string) string
		query   string
		body    any
		binding bool
	}
	endpoints := []endpoint{
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
	for _, ep := range endpoints {
		for name, id := range bad {
			// The bad id as instance id, and (for binding endpoints) as
			// binding id of an instance that exists.
			cases := map[string][2]string{"instance_id": {id, "ids-binding"}}
			if ep.binding {
				cases["binding_id"] = [2]string{good, id}
			}
			for field, ids := range cases {
				t.Run(ep.name+"/"+field+"/"+name, func(t *testing.T) {
					r := hh.do(call{method: ep.method, path: ep.path(ids[0], ids[1]), query: ep.query, body: ep.body})
					if r.status != 400 || !strings.Contains(r.str("description"), field) {
						t.Fatalf("%s %q: got %s; want 400 with a description naming %s", ep.method, ep.path(ids[0], ids[1]), r, field)
					}
				})
			}
		}
	}

	// Nothing was stored under any of the refused ids.
	ctx := context.Background()
	for name, id := range bad {
		err := env.onboarding.Client.Get(ctx, sf.InstanceKey(id), &osbv1alpha1.SFServiceInstance{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: an instance was stored for a refused id: %v", name, err)
		}
		err = env.onboarding.Client.Get(ctx, sf.BindingKey(good, id), &osbv1alpha1.SFServiceBinding{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: a binding was stored for a refused id: %v", name, err)
		}
	}
	list := &osbv1alpha1.SFServiceBindingList{}
	if err := env.onboarding.Client.List(ctx, list, client.InNamespace(sf.InstanceNamespace(good))); err != nil || len(list.Items) != 0 {
		t.Errorf("bindings of %s after refused binds: %d (%v); want none", good, len(list.Items), err)
	}

	// Printable characters beyond ASCII, and a literal U+FFFD, are ids
	// like any other: unknown here, so 404, not 400.
	for _, id := range []string{"ids-ünïcode-名前", "ids-\ufffd"} {
		if r := hh.do(call{method: "GET", path: instancePath(id)}); r.status != 404 {
			t.Errorf("GET instance %q: got %s; want 404", id, r)
		}
	}
}
