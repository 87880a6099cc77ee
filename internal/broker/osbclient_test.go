package broker_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/marketplane/marketplane/internal/broker/app"
	brokerosb "github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// The tests in this file drive the broker through Kubernetes
// service-catalog's OSB client library, unchanged: what it sends at each
// API version is what a platform built on it sends (Service Manager pins it
// at 2.13), and what it accepts back is what such a platform can use.

// osbVersion is an API version a real client speaks.
type osbVersion struct {
	// name is the version on the wire.
	name string
	// client is the version the library behaves as: it knows 2.11 to
	// 2.14, so 2.17 is its 2.14 behind a proxy that sends 2.17.
	client osb.APIVersion
}

// osbVersions are the versions the broker must serve through the real
// client: 2.13 (Service Manager, eden), 2.14 (the library's latest) and
// 2.17 (the broker's).
var osbVersions = []osbVersion{
	{name: "2.13", client: osb.Version2_13()},
	{name: "2.14", client: osb.Version2_14()},
	{name: "2.17", client: osb.Version2_14()},
}

// bindParameters are the parameters of the test's binds: at 2.17 the
// test provisioner leaves endpoints out, since the library decodes their
// ports as numbers and 2.15 made them strings (TestBindResponseByVersion
// checks both forms).
func (v osbVersion) bindParameters() map[string]any {
	if v.name == "2.17" {
		return map[string]any{"noEndpoints": true}
	}
	return nil
}

// asyncBindings reports whether the library lets this version bind
// asynchronously and fetch instances and bindings.
func (v osbVersion) asyncBindings() bool { return v.client.AtLeast(osb.Version2_14()) }

// osbClient returns the library's client for the broker at base, speaking
// v with the given password.
func osbClient(t *testing.T, base string, v osbVersion, password string) osb.Client {
	t.Helper()
	if v.name != v.client.HeaderValue() {
		base = versionProxy(t, base, v.name)
	}
	cfg := osb.DefaultClientConfiguration()
	cfg.Name, cfg.URL, cfg.APIVersion, cfg.TimeoutSeconds = "marketplane", base, v.client, 60
	cfg.AuthConfig = &osb.AuthConfig{BasicAuthConfig: &osb.BasicAuthConfig{Username: testUser, Password: password}}
	c, err := osb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// versionProxy serves base over loopback with X-Broker-API-Version
// replaced by version: the library has no hook for headers of its own.
func versionProxy(t *testing.T, base, version string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set(brokerosb.HeaderAPIVersion, version)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// statusOf returns the HTTP status and description of an error the library
// returned for a broker's answer; 0 for any other error.
func statusOf(err error) (int, string) {
	var e osb.HTTPStatusCodeError
	if !errors.As(err, &e) {
		return 0, ""
	}
	d := ""
	if e.Description != nil {
		d = *e.Description
	}
	return e.StatusCode, d
}

// awaitOSB polls until cond reports done, failing the test after three
// minutes (a control plane of a code-based instance starts an API server;
// CI's machine is loaded). An error of cond is remembered for the message
// and polled again.
func awaitOSB(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		done, err := cond()
		last = err
		return done, nil
	})
	if err != nil {
		t.Fatalf("%s: not reached within three minutes (last error: %v)", what, last)
	}
}

// awaitLastOperation polls an instance operation until it succeeded.
func awaitLastOperation(t *testing.T, c osb.Client, id string, op *osb.OperationKey, what string) {
	t.Helper()
	awaitOSB(t, what, func() (bool, error) {
		r, err := c.PollLastOperation(&osb.LastOperationRequest{InstanceID: id, OperationKey: op})
		if osb.IsGoneError(err) {
			// 410: the deletion is over (OSB: the platform forgets
			// the instance).
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if r.State == osb.StateFailed {
			t.Fatalf("%s failed: %v", what, r.Description)
		}
		return r.State == osb.StateSucceeded, nil
	})
}

// awaitBindingOperation polls a binding operation until it succeeded.
func awaitBindingOperation(t *testing.T, c osb.Client, id, bid string, op *osb.OperationKey, what string) {
	t.Helper()
	awaitOSB(t, what, func() (bool, error) {
		r, err := c.PollBindingLastOperation(&osb.BindingLastOperationRequest{InstanceID: id, BindingID: bid, OperationKey: op})
		if err != nil {
			return false, err
		}
		if r.State == osb.StateFailed {
			t.Fatalf("%s failed: %v", what, r.Description)
		}
		return r.State == osb.StateSucceeded, nil
	})
}

// cfIdentity is the originating identity Cloud Foundry sends.
var cfIdentity = &osb.OriginatingIdentity{Platform: "cloudfoundry", Value: `{"user_id":"683ea748-3092-4ff4-b656-39cacc4d5360"}`}

// TestRealClientSF drives every endpoint for Service Fabrik plans (a
// synchronous one and an asynchronous one with asynchronous bindings)
// through the real client library at 2.13, 2.14 and 2.17: catalog,
// provision, last_operation, update, fetch, bind, fetch binding, binding
// last_operation, unbind, deprovision, and the orphan mitigation a
// platform performs after a failed provision or bind. A 2.13 client can
// neither bind asynchronously nor fetch: the library refuses those calls
// itself, and an asynchronous-only binding is 412 naming 2.14.
func TestRealClientSF(t *testing.T) {
	b := setup(t)
	for _, v := range osbVersions {
		t.Run(v.name, func(t *testing.T) {
			c := osbClient(t, b.url, v, testPassword)
			cat, err := c.GetCatalog()
			if err != nil {
				t.Fatalf("catalog: %v", err)
			}
			found := map[string]bool{}
			for _, s := range cat.Services {
				for _, p := range s.Plans {
					found[p.ID] = true
				}
			}
			if !found[planSmall] || !found[planAsync] {
				t.Fatalf("the catalog lacks %s or %s: %d services", planSmall, planAsync, len(cat.Services))
			}
			suffix := strings.ReplaceAll(v.name, ".", "")
			t.Run("Sync", func(t *testing.T) { realClientSync(t, c, v, "rc-sync-"+suffix) })
			t.Run("Async", func(t *testing.T) { realClientAsync(t, c, v, "rc-async-"+suffix) })
			t.Run("OrphanMitigation", func(t *testing.T) { realClientOrphans(t, c, "rc-orphan-"+suffix) })
		})
	}
}

// realClientSync runs the synchronous plan's lifecycle.
func realClientSync(t *testing.T, c osb.Client, v osbVersion, id string) {
	bid := id + "-binding"
	sid := serviceOf(planSmall)
	p, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: sid, PlanID: planSmall,
		OrganizationGUID: "org-1", SpaceGUID: "space-1", Parameters: map[string]any{"size": 1},
		Context:             map[string]any{"platform": "cloudfoundry", "organization_guid": "org-1", "space_guid": "space-1"},
		OriginatingIdentity: cfIdentity})
	if err != nil || p.Async {
		t.Fatalf("provision: %v (async %v)", err, p != nil && p.Async)
	}
	if got := instance(t, id).Annotations[sf.AnnotationOriginatingIdentity]; !strings.HasPrefix(got, "cloudfoundry ") || !strings.Contains(got, "683ea748") {
		t.Errorf("originating identity recorded as %q", got)
	}
	u, err := c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: id, ServiceID: sid, Parameters: map[string]any{"size": 4}})
	if err != nil || u.Async {
		t.Fatalf("update: %v", err)
	}
	if v.asyncBindings() {
		g, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: id})
		if err != nil || g.PlanID != planSmall || g.Parameters["size"] != 4.0 {
			t.Fatalf("fetch: %v %+v", err, g)
		}
	} else if _, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: id}); err == nil {
		t.Errorf("the %s client fetched an instance; the library should refuse it before 2.14", v.name)
	}
	bd, err := c.Bind(&osb.BindRequest{InstanceID: id, BindingID: bid, ServiceID: sid, PlanID: planSmall, Parameters: v.bindParameters(),
		Context: map[string]any{"platform": "cloudfoundry"}, OriginatingIdentity: cfIdentity})
	if err != nil || bd.Async || bd.Credentials["username"] != "user-"+bid {
		t.Fatalf("bind: %v %+v", err, bd)
	}
	if v.asyncBindings() {
		g, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: id, BindingID: bid})
		if err != nil || g.Credentials["username"] != "user-"+bid {
			t.Fatalf("fetch binding: %v", err)
		}
	}
	if _, err := c.Unbind(&osb.UnbindRequest{InstanceID: id, BindingID: bid, ServiceID: sid, PlanID: planSmall}); err != nil {
		t.Fatalf("unbind: %v", err)
	}
	if _, err := c.Unbind(&osb.UnbindRequest{InstanceID: id, BindingID: bid, ServiceID: sid, PlanID: planSmall}); err != nil {
		t.Fatalf("unbind again (410, which the library takes as done): %v", err)
	}
	d, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: sid, PlanID: planSmall})
	if err != nil || d.Async {
		t.Fatalf("deprovision: %v", err)
	}
}

// realClientAsync runs the asynchronous plan's lifecycle.
func realClientAsync(t *testing.T, c osb.Client, v osbVersion, id string) {
	bid := id + "-binding"
	sid := serviceOf(planAsync)
	p, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: sid, PlanID: planAsync, AcceptsIncomplete: true,
		OrganizationGUID: "org-1", SpaceGUID: "space-1", Context: map[string]any{"platform": "cloudfoundry"}})
	if err != nil || !p.Async || p.OperationKey == nil {
		t.Fatalf("provision: %v %+v", err, p)
	}
	awaitLastOperation(t, c, id, p.OperationKey, "provision")
	u, err := c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: id, ServiceID: sid, AcceptsIncomplete: true, Parameters: map[string]any{"tier": "gold"}})
	if err != nil || !u.Async {
		t.Fatalf("update: %v %+v", err, u)
	}
	awaitLastOperation(t, c, id, u.OperationKey, "update")
	if !v.asyncBindings() {
		// The plan's bindings are asynchronous only: 412 with the
		// version that has them, not a 422 the caller cannot follow.
		_, err := c.Bind(&osb.BindRequest{InstanceID: id, BindingID: bid, ServiceID: sid, PlanID: planAsync})
		if status, d := statusOf(err); status != http.StatusPreconditionFailed || !strings.Contains(d, "2.14") {
			t.Fatalf("bind at %s: %v, want 412 naming 2.14", v.name, err)
		}
	} else {
		g, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: id})
		if err != nil || g.Parameters["tier"] != "gold" {
			t.Fatalf("fetch: %v %+v", err, g)
		}
		bd, err := c.Bind(&osb.BindRequest{InstanceID: id, BindingID: bid, ServiceID: sid, PlanID: planAsync, AcceptsIncomplete: true, Parameters: v.bindParameters()})
		if err != nil || !bd.Async {
			t.Fatalf("bind: %v %+v", err, bd)
		}
		awaitBindingOperation(t, c, id, bid, bd.OperationKey, "bind")
		gb, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: id, BindingID: bid})
		if err != nil || gb.Credentials["username"] != "user-"+bid {
			t.Fatalf("fetch binding: %v", err)
		}
		ub, err := c.Unbind(&osb.UnbindRequest{InstanceID: id, BindingID: bid, ServiceID: sid, PlanID: planAsync, AcceptsIncomplete: true})
		if err != nil || !ub.Async {
			t.Fatalf("unbind: %v %+v", err, ub)
		}
		awaitBindingOperation(t, c, id, bid, ub.OperationKey, "unbind")
	}
	d, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: sid, PlanID: planAsync, AcceptsIncomplete: true})
	if err != nil || !d.Async {
		t.Fatalf("deprovision: %v %+v", err, d)
	}
	awaitLastOperation(t, c, id, d.OperationKey, "deprovision")
}

// realClientOrphans fails a provision and a bind and cleans up as a
// platform does after a failure: a deprovision of the failed instance and
// an unbind of the failed binding, both of which the library must take as
// done.
func realClientOrphans(t *testing.T, c osb.Client, id string) {
	sid := serviceOf(planSmall)
	_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: sid, PlanID: planSmall,
		OrganizationGUID: "org-1", SpaceGUID: "space-1", Parameters: map[string]any{"fail": true}})
	if status, d := statusOf(err); status < 500 || d == "" {
		t.Fatalf("failing provision: %v, want a 5xx with a description", err)
	}
	if _, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: sid, PlanID: planSmall}); err != nil {
		t.Fatalf("orphan mitigation of the instance: %v", err)
	}
	if _, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id + "-2", ServiceID: sid, PlanID: planSmall,
		OrganizationGUID: "org-1", SpaceGUID: "space-1"}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	bid := id + "-binding"
	_, err = c.Bind(&osb.BindRequest{InstanceID: id + "-2", BindingID: bid, ServiceID: sid, PlanID: planSmall, Parameters: map[string]any{"fail": true}})
	if status, _ := statusOf(err); status < 500 {
		t.Fatalf("failing bind: %v, want a 5xx", err)
	}
	if _, err := c.Unbind(&osb.UnbindRequest{InstanceID: id + "-2", BindingID: bid, ServiceID: sid, PlanID: planSmall}); err != nil {
		t.Fatalf("orphan mitigation of the binding: %v", err)
	}
	if _, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id + "-2", ServiceID: sid, PlanID: planSmall}); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
}

// TestRealClientRefusals checks that a version or credentials the broker
// refuses reach the library as an error with a description saying what to
// do, never as an empty catalog: 401 for a wrong password, 412 naming the
// versions to send when the platform operator raised the minimum
// (--min-api-version 2.14) and the client speaks 2.13; and that the
// library's oldest versions, 2.11 and 2.12, get the catalog by default.
func TestRealClientRefusals(t *testing.T) {
	b := setup(t)
	for _, v := range []osb.APIVersion{osb.Version2_11(), osb.Version2_12()} {
		c := osbClient(t, b.url, osbVersion{name: v.HeaderValue(), client: v}, testPassword)
		if cat, err := c.GetCatalog(); err != nil || len(cat.Services) == 0 {
			t.Errorf("catalog at %s: %v", v.HeaderValue(), err)
		}
	}
	c := osbClient(t, b.url, osbVersions[0], "wrong")
	cat, err := c.GetCatalog()
	if status, d := statusOf(err); status != http.StatusUnauthorized || !strings.Contains(d, "credentials") {
		t.Errorf("catalog with a wrong password: %v (catalog %v), want 401 with a description", err, cat)
	}

	strict, err := startBrokerProcess(env.kubeconfigs["onboarding"], func(o *app.Options) { o.MinAPIVersion = "2.14" })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := strict.stop(); err != nil {
			t.Errorf("stop the strict broker: %v", err)
		}
	})
	cat, err = osbClient(t, strict.url, osbVersions[0], testPassword).GetCatalog()
	if status, d := statusOf(err); status != http.StatusPreconditionFailed || !strings.Contains(d, `"2.13"`) || !strings.Contains(d, "2.14") {
		t.Errorf("catalog at 2.13 from a broker whose minimum is 2.14: %v (catalog %v), want 412 naming 2.13 and 2.14", err, cat)
	}
	if _, err := osbClient(t, strict.url, osbVersions[1], testPassword).GetCatalog(); err != nil {
		t.Errorf("catalog at 2.14 from a broker whose minimum is 2.14: %v", err)
	}
}

// TestBindResponseByVersion checks that a bind response carries what the
// caller's version defines: endpoints (ports as strings) from 2.15 on, none
// before, since an older client decodes them by its own version's rules.
func TestBindResponseByVersion(t *testing.T) {
	b := setup(t)
	hh := h{t: t, base: b.url}
	const id, bid = "versioned-bind", "versioned-bind-binding"
	hh.expect(hh.provision(id, planSmall, nil, false), 201, "provision")
	hh.expect(hh.bind(id, bid, planSmall, nil, false), 201, "bind")
	for version, want := range map[string]bool{"2.13": false, "2.14": false, "2.15": true, "2.17": true} {
		r := hh.expect(hh.do(call{method: "GET", path: bindingPath(id, bid), header: map[string]string{brokerosb.HeaderAPIVersion: version}}), 200, "fetch binding at "+version)
		endpoints, ok := r.body["endpoints"].([]any)
		if ok != want {
			t.Errorf("at %s: endpoints %v, want present=%v", version, r.body["endpoints"], want)
		}
		if ok {
			if ports, _ := field(endpoints, 0, "ports").([]any); len(ports) != 1 || ports[0] != "5432" {
				t.Errorf("at %s: ports %v, want [\"5432\"]", version, ports)
			}
		}
		if field(r.body, "credentials", "username") != "user-"+bid {
			t.Errorf("at %s: credentials missing: %s", version, r)
		}
	}
}
