package main

// The broker phase (issue #15): the user's path, OSB HTTP through the real
// broker (internal/broker/app: its kube store, caches and reaper) on a
// loopback listener, in front of the same in-process inter-operator and API
// server as the provisioner's load phase, in the same run:
//
//  1. sync: -single instances of the synchronous one-ConfigMap plan, one
//     after another on an otherwise idle system, each PUT answered 201 once
//     the provisioner succeeded: p50/p99 of the PUT;
//  2. provision+bind: -n instances of an asynchronous variant of the plan
//     (manager.async, synchronous bindings) by -workers goroutines, as a
//     platform does: PUT with accepts_incomplete=true (202), last_operation
//     polled every brokerPollInterval until succeeded, then PUT of a
//     binding (201 with the bind response). Instances/s from the first PUT
//     to the last binding, its ratio to the load phase's provisioner-only
//     instances/s, p50/p99 of provisioning (PUT to succeeded) and binding;
//  3. deprovision: for every instance the unbind (DELETE) and the
//     deprovision (DELETE with accepts_incomplete=true, 202), then
//     last_operation polled until the deletion succeeded (or 410): the
//     time from the first DELETE until every instance is deleted, and
//     the API requests of the phase per instance, everyone's (broker,
//     provisioner, API server) from apiserver_request_total, counted
//     after -settle so that late writes count.
//
// Targets: provision+bind instances/s ≥ 0.5× the same provision+bind
// without the broker (the direct phase, direct.go) of the same run;
// deprovision of all -n ≤ 30 s, with ≤ 5 writes and
// ≤ 3 reads per instance; sync provision p99 ≤ 100 ms unloaded.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/bench/internal/parallel"
	"github.com/marketplane/marketplane/internal/broker/app"
	"github.com/marketplane/marketplane/internal/interoperator"
)

// Targets of the broker's path.
const (
	targetBrokerRatio       = 0.5
	targetDeprovisionAll    = 30 * time.Second
	targetDeprovisionWrites = 5.0 // everyone's, per instance
	targetDeprovisionReads  = 3.0 // everyone's, per instance
	targetBrokerSyncP99     = 100 * time.Millisecond
	brokerPollInterval      = 20 * time.Millisecond
	brokerUser              = "bench"
	brokerPassword          = "bench-password"
	asyncPlanID             = "3b9e7c1d-5f2a-4e8b-a6d4-0c1b2a3f4e5d"
	asyncPlanName           = "one-configmap-async"
	brokerInstancePrefix    = "bk"
	brokerSyncInstancePref  = "bks"
)

// brokerReport holds the figures of the broker phase.
type brokerReport struct {
	syncP50, syncP99 time.Duration
	// perSecond is the provision+bind rate through the broker; ratio is
	// perSecond ÷ the rate of the same work without the broker (the
	// direct phase), zero until that ran.
	perSecond, ratio           float64
	provisionP50, provisionP99 time.Duration
	bindP50, bindP99           time.Duration
	deprovisionAll             time.Duration
	// deprovisionWrites and deprovisionReads are the API requests of the
	// deprovision per instance, everyone's.
	deprovisionWrites, deprovisionReads float64
}

// ok reports whether the broker phase met its targets.
func (b *brokerReport) ok() bool {
	return b.ratio >= targetBrokerRatio && b.deprovisionOK() && b.syncP99 <= targetBrokerSyncP99
}

// deprovisionOK reports whether the deprovision met its targets: its time
// and its API requests per instance.
func (b *brokerReport) deprovisionOK() bool {
	return b.deprovisionAll > 0 && b.deprovisionAll <= targetDeprovisionAll &&
		b.deprovisionWrites <= targetDeprovisionWrites && b.deprovisionReads <= targetDeprovisionReads
}

// brokerPhase runs the broker phase after the load phase, whose rate it
// compares with.
func (h *harness) brokerPhase(ctx context.Context, rep *report) error {
	br := &brokerReport{}
	if err := h.createAsyncPlan(ctx); err != nil {
		return err
	}
	bc, stop, err := h.startBroker(ctx)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(h.out, "\nbroker: the OSB broker (internal/broker/app, as marketplane-broker runs it) on %s, basic auth, X-Broker-API-Version %s\n", bc.base, brokerAPIVersion)

	// 1. Unloaded synchronous provisions, one after another.
	if _, err := bc.provisionSync(ctx, brokerSyncInstancePref+"-warmup"); err != nil {
		return err
	}
	syncLat := make([]time.Duration, 0, h.c.single)
	for _, id := range names(brokerSyncInstancePref, h.c.single) {
		d, err := bc.provisionSync(ctx, id)
		if err != nil {
			return err
		}
		syncLat = append(syncLat, d)
	}
	br.syncP50, br.syncP99 = percentile(syncLat, 0.50), percentile(syncLat, 0.99)
	fmt.Fprintf(h.out, "  sync provision, %d one after another (PUT → 201): p50 %s  p99 %s  (target p99 ≤ %s: %s)\n",
		h.c.single, ms(br.syncP50), ms(br.syncP99), ms(targetBrokerSyncP99), verdict(br.syncP99 <= targetBrokerSyncP99))
	time.Sleep(h.c.settle)

	// 2. Provision and bind under load.
	ids := names(brokerInstancePrefix, h.c.n)
	countsBefore, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	cpuBefore := cpuSeconds()
	instReconciles, bindReconciles := reconciles(), reconcilesOf(interoperator.BindingControllerName)
	stopProfiles, err := h.startProfiles(ctx, h.c.profilePhase == "broker")
	if err != nil {
		return err
	}
	defer stopProfiles() //nolint:errcheck // stopped again below; a second stop does nothing
	provLat := make([]time.Duration, len(ids))
	bindLat := make([]time.Duration, len(ids))
	elapsed, err := parallel.Run(ctx, h.c.workers, len(ids), func(ctx context.Context, i int) error {
		var err error
		if provLat[i], err = bc.provisionAsync(ctx, ids[i], h.c.timeout); err != nil {
			return err
		}
		bindLat[i], err = bc.bind(ctx, ids[i])
		return err
	})
	if err != nil {
		return fmt.Errorf("broker provision+bind: %w", err)
	}
	if err := stopProfiles(); err != nil {
		return err
	}
	br.perSecond = float64(len(ids)) / elapsed.Seconds()
	if rep.loadPerSecond > 0 {
		br.ratio = br.perSecond / rep.loadPerSecond
	}
	br.provisionP50, br.provisionP99 = percentile(provLat, 0.50), percentile(provLat, 0.99)
	br.bindP50, br.bindP99 = percentile(bindLat, 0.50), percentile(bindLat, 0.99)
	fmt.Fprintf(h.out, "  provision+bind: %d instances by %d goroutines (PUT accepts_incomplete → 202, last_operation every %s until succeeded, PUT binding → 201) in %s\n",
		len(ids), h.c.workers, brokerPollInterval, elapsed.Round(time.Millisecond))
	fmt.Fprintf(h.out, "  instances/s through the broker: %8.1f   (÷ the load phase's %.1f = %.3f; the target compares with the same work without the broker, below)\n",
		br.perSecond, rep.loadPerSecond, br.perSecond/rep.loadPerSecond)
	fmt.Fprintf(h.out, "  provision (PUT → succeeded): p50 %s  p99 %s;  bind (PUT → 201): p50 %s  p99 %s\n",
		ms(br.provisionP50), ms(br.provisionP99), ms(br.bindP50), ms(br.bindP99))

	countsAfter, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	cpuAfter := cpuSeconds()
	printCPU(h.out, "provision+bind", cpuBefore, cpuAfter, elapsed)
	fmt.Fprintf(h.out, "  reconciles per instance: instance controller %.2f, binding controller %.2f\n",
		(reconciles()-instReconciles)/float64(len(ids)), (reconcilesOf(interoperator.BindingControllerName)-bindReconciles)/float64(len(ids)))
	printPerInstance(h.out, countsAfter.minus(countsBefore), len(ids))
	if err := h.deprovisionPhase(ctx, bc, ids, br); err != nil {
		return err
	}
	if h.c.profilePhase != "load" {
		h.printProfiles()
	}
	rep.broker = br
	return nil
}

// deprovisionPhase unbinds and deprovisions the instances ids through the
// broker and measures how long that takes and what it costs.
func (h *harness) deprovisionPhase(ctx context.Context, bc *brokerClient, ids []string, br *brokerReport) error {
	// The requests after the provision+bind settle before the deprovision
	// is counted, as the deprovision's settle after it.
	time.Sleep(h.c.settle)
	countsBefore, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	cpuBefore := cpuSeconds()
	unbindLat := make([]time.Duration, len(ids))
	deleteLat := make([]time.Duration, len(ids))
	stopProfiles, err := h.startProfiles(ctx, h.c.profilePhase == "deprovision")
	if err != nil {
		return err
	}
	defer stopProfiles() //nolint:errcheck // stopped again below; a second stop does nothing
	elapsed, err := parallel.Run(ctx, h.c.workers, len(ids), func(ctx context.Context, i int) error {
		var err error
		unbindLat[i], deleteLat[i], err = bc.deprovision(ctx, ids[i], h.c.timeout)
		return err
	})
	if err != nil {
		return fmt.Errorf("broker deprovision: %w", err)
	}
	if err := stopProfiles(); err != nil {
		return err
	}
	cpuAfter := cpuSeconds()
	br.deprovisionAll = elapsed
	fmt.Fprintf(h.out, "  deprovision: %d × (unbind, DELETE accepts_incomplete → 202, last_operation until succeeded) by %d goroutines: %s  (target ≤ %s: %s)\n",
		len(ids), h.c.workers, elapsed.Round(time.Millisecond), targetDeprovisionAll, verdict(br.deprovisionAll <= targetDeprovisionAll))
	fmt.Fprintf(h.out, "  unbind (DELETE → 200): p50 %s  p99 %s;  deprovision (DELETE → last_operation succeeded or 410): p50 %s  p99 %s\n",
		ms(percentile(unbindLat, 0.50)), ms(percentile(unbindLat, 0.99)), ms(percentile(deleteLat, 0.50)), ms(percentile(deleteLat, 0.99)))
	printCPU(h.out, "deprovision", cpuBefore, cpuAfter, elapsed)
	time.Sleep(h.c.settle)
	countsAfter, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	d := countsAfter.minus(countsBefore)
	printRequestTable(h.out, "deprovision", d, len(ids))
	br.deprovisionWrites, br.deprovisionReads = printPerInstance(h.out, d, len(ids))
	fmt.Fprintf(h.out, "  deprovision requests per instance: writes %.2f (target ≤ %.0f: %s), reads %.2f (target ≤ %.0f: %s)\n",
		br.deprovisionWrites, targetDeprovisionWrites, verdict(br.deprovisionWrites <= targetDeprovisionWrites),
		br.deprovisionReads, targetDeprovisionReads, verdict(br.deprovisionReads <= targetDeprovisionReads))
	return nil
}

// createAsyncPlan registers the asynchronous variant of the one-ConfigMap
// plan and waits until the inter-operator accepted it.
func (h *harness) createAsyncPlan(ctx context.Context) error {
	c := h.rs.platform.Client
	plan := &osbv1alpha1.SFPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: catalogNamespace, Name: asyncPlanName},
		Spec: osbv1alpha1.SFPlanSpec{ID: asyncPlanID, Name: asyncPlanName, ServiceID: serviceID,
			Description: "one ConfigMap per instance, asynchronous provisioning", Free: true, Bindable: true,
			Manager:   &runtime.RawExtension{Raw: []byte(`{"async":true,"asyncBinding":false}`)},
			Templates: []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: provisionTemplate}}},
	}
	if err := c.Create(ctx, plan); err != nil {
		return fmt.Errorf("create the asynchronous plan: %w", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p := &osbv1alpha1.SFPlan{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: catalogNamespace, Name: asyncPlanName}, p); err != nil {
			return false, err
		}
		return p.Status.SpecHash != "", nil
	})
	if err != nil {
		return fmt.Errorf("the catalog did not accept the asynchronous plan: %w", err)
	}
	return nil
}

// brokerAPIVersion is the X-Broker-API-Version the benchmark sends.
const brokerAPIVersion = "2.17"

// brokerClient is an OSB platform talking to the benchmark's broker.
type brokerClient struct {
	base string
	http *http.Client
}

// startBroker runs the broker against the benchmark's API server(s) until
// stop is called, and waits until its catalog offers both plans.
func (h *harness) startBroker(ctx context.Context) (*brokerClient, func(), error) {
	platformKC, err := h.rs.platform.KubeconfigPath()
	if err != nil {
		return nil, nil, err
	}
	onboardingKC, err := h.rs.onboarding.KubeconfigPath()
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	o := app.DefaultOptions()
	o.Kubeconfig, o.OnboardingKubeconfig = platformKC, onboardingKC
	o.CatalogNamespace = catalogNamespace
	o.Username, o.Password = brokerUser, brokerPassword
	o.Listener = ln
	o.MetricsBindAddress = "0"
	o.Verbosity = "ERROR"
	ready := make(chan struct{})
	o.Ready = func() { close(ready) }
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(bctx, o) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintf(h.out, "the broker stopped with an error: %v\n", err)
		}
	}
	select {
	case <-ready:
	case err := <-done:
		cancel()
		return nil, nil, fmt.Errorf("the broker did not start: %w", err)
	case <-time.After(time.Minute):
		stop()
		return nil, nil, errors.New("the broker did not start within a minute")
	}
	bc := &brokerClient{base: "http://" + ln.Addr().String(), http: &http.Client{
		Timeout:   2 * time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: 4 * h.c.workers, MaxConnsPerHost: 0},
	}}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		status, body, err := bc.do(ctx, http.MethodGet, "/v2/catalog", nil)
		return err == nil && status == http.StatusOK && bytes.Contains(body, []byte(asyncPlanID)) && bytes.Contains(body, []byte(planID)), nil
	})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("the broker's catalog did not offer both plans: %w", err)
	}
	return bc, stop, nil
}

// do sends one OSB request and returns the status and body.
func (bc *brokerClient) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, bc.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(brokerUser, brokerPassword)
	req.Header.Set("X-Broker-API-Version", brokerAPIVersion)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := bc.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode, data, nil
}

// expect sends a request and fails unless the answer has status want.
func (bc *brokerClient) expect(ctx context.Context, want int, method, path string, body any) ([]byte, error) {
	status, data, err := bc.do(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if status != want {
		return nil, fmt.Errorf("%s %s: %d %s, want %d", method, path, status, strings.TrimSpace(string(data)), want)
	}
	return data, nil
}

func provisionBody(plan string) map[string]any {
	return map[string]any{
		"service_id": serviceID, "plan_id": plan,
		"organization_guid": "bench-org", "space_guid": "bench-space",
		"context": map[string]any{"platform": "kubernetes", "namespace": "bench"},
	}
}

// provisionSync provisions id with the synchronous plan and returns how
// long the PUT took.
func (bc *brokerClient) provisionSync(ctx context.Context, id string) (time.Duration, error) {
	start := time.Now()
	_, err := bc.expect(ctx, http.StatusCreated, http.MethodPut, "/v2/service_instances/"+id, provisionBody(planID))
	return time.Since(start), err
}

// provisionAsync provisions id with the asynchronous plan and polls its
// last_operation until it succeeded; it returns the time from the PUT to
// the poll that said succeeded.
func (bc *brokerClient) provisionAsync(ctx context.Context, id string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	data, err := bc.expect(ctx, http.StatusAccepted, http.MethodPut, "/v2/service_instances/"+id+"?accepts_incomplete=true", provisionBody(asyncPlanID))
	if err != nil {
		return 0, err
	}
	if err := bc.await(ctx, "/v2/service_instances/"+id, data, timeout); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// bind binds id (the asynchronous plan binds synchronously) and returns
// how long the PUT took.
func (bc *brokerClient) bind(ctx context.Context, id string) (time.Duration, error) {
	start := time.Now()
	_, err := bc.expect(ctx, http.StatusCreated, http.MethodPut, "/v2/service_instances/"+id+"/service_bindings/"+id+"-b",
		map[string]any{"service_id": serviceID, "plan_id": asyncPlanID, "bind_resource": map[string]any{"app_guid": "bench-app"}})
	return time.Since(start), err
}

// deprovision unbinds and deprovisions id and waits until the deletion
// succeeded. It returns how long the unbind and the deprovision took.
func (bc *brokerClient) deprovision(ctx context.Context, id string, timeout time.Duration) (unbind, deprovision time.Duration, err error) {
	q := "?service_id=" + serviceID + "&plan_id=" + asyncPlanID + "&accepts_incomplete=true"
	start := time.Now()
	if _, err := bc.expect(ctx, http.StatusOK, http.MethodDelete, "/v2/service_instances/"+id+"/service_bindings/"+id+"-b"+q, nil); err != nil {
		return 0, 0, err
	}
	unbind = time.Since(start)
	start = time.Now()
	// A platform retries a 422 ConcurrencyError: the unbind's 200 comes
	// when the binding's deletion finished, but another replica's or the
	// provisioner's view may still be catching up.
	deadline := time.Now().Add(timeout)
	for {
		status, data, err := bc.do(ctx, http.MethodDelete, "/v2/service_instances/"+id+q, nil)
		switch {
		case err != nil:
			return unbind, 0, err
		case status == http.StatusAccepted:
			err := bc.await(ctx, "/v2/service_instances/"+id, data, timeout)
			return unbind, time.Since(start), err
		case status != http.StatusUnprocessableEntity || !bytes.Contains(data, []byte("ConcurrencyError")) || time.Now().After(deadline):
			return unbind, 0, fmt.Errorf("DELETE /v2/service_instances/%s: %d %s, want 202", id, status, strings.TrimSpace(string(data)))
		}
		select {
		case <-ctx.Done():
			return unbind, 0, ctx.Err()
		case <-time.After(brokerPollInterval):
		}
	}
}

// await polls the last_operation of the operation a 202 answer (accepted)
// named until it succeeded; 410 Gone ends a polled deletion as well.
func (bc *brokerClient) await(ctx context.Context, path string, accepted []byte, timeout time.Duration) error {
	var op struct {
		Operation string `json:"operation"`
	}
	if err := json.Unmarshal(accepted, &op); err != nil || op.Operation == "" {
		return fmt.Errorf("%s: 202 without an operation: %q", path, accepted)
	}
	deadline := time.Now().Add(timeout)
	for {
		status, data, err := bc.do(ctx, http.MethodGet, path+"/last_operation?operation="+op.Operation, nil)
		if err != nil {
			return err
		}
		var lo struct {
			State       string `json:"state"`
			Description string `json:"description"`
		}
		switch {
		case status == http.StatusGone && strings.HasPrefix(op.Operation, "delete-"):
			return nil
		case status != http.StatusOK:
			return fmt.Errorf("%s last_operation %s: %d %s", path, op.Operation, status, strings.TrimSpace(string(data)))
		case json.Unmarshal(data, &lo) != nil:
			return fmt.Errorf("%s last_operation %s: not JSON: %q", path, op.Operation, data)
		case lo.State == "succeeded":
			return nil
		case lo.State == "failed":
			return fmt.Errorf("%s %s failed: %s", path, op.Operation, lo.Description)
		case time.Now().After(deadline):
			return fmt.Errorf("%s %s not done within %s (state %q)", path, op.Operation, timeout, lo.State)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(brokerPollInterval):
		}
	}
}

// printPerInstance prints the API requests of a broker phase per instance,
// everyone's (broker, provisioner, the API server's own), writes by
// resource and reads by verb and resource: where the phase's API-server
// time goes. It returns the writes and reads per instance.
func printPerInstance(out io.Writer, d scrapes, n int) (writes, reads float64) {
	line := func(w writeCounts) (string, float64) {
		var parts []string
		var sum float64
		for _, k := range w.keys() {
			if w[k] > 0 {
				parts = append(parts, fmt.Sprintf("%s %.2f", k.resource, w[k]/float64(n)))
				sum += w[k]
			}
		}
		if len(parts) == 0 {
			return "none", 0
		}
		return fmt.Sprintf("%.2f (%s)", sum/float64(n), strings.Join(parts, ", ")), sum / float64(n)
	}
	ws, writes := line(d.writes)
	rs, reads := line(d.reads)
	fmt.Fprintf(out, "  API writes per instance (everyone's): %s\n", ws)
	fmt.Fprintf(out, "  API reads per instance (everyone's): %s\n", rs)
	return writes, reads
}

// printRequestTable prints the API requests of a phase (what) by server
// and resource: writes with their 409s, then reads by verb, each in all
// and per instance. Rows below 0.01 per instance (watches, the API
// server's own) are summed in one line; the sums above count them.
func printRequestTable(out io.Writer, what string, d scrapes, n int) {
	fmt.Fprintf(out, "  API requests during the %s (apiserver_request_total, everyone's, every code):\n", what)
	fmt.Fprintf(out, "    %-6s %-10s %-34s %8s %6s %9s\n", "", "server", "resource", "total", "409s", "/instance")
	rows := func(kind string, w writeCounts, conflicts writeCounts) {
		var small, smallRows float64
		for _, k := range w.keys() {
			switch per := w[k] / float64(n); {
			case w[k] <= 0:
			case per < 0.01:
				small += w[k]
				smallRows++
			default:
				fmt.Fprintf(out, "    %-6s %-10s %-34s %8.0f %6.0f %9.2f\n", kind, k.server, k.resource, w[k], conflicts[k], per)
			}
		}
		if smallRows > 0 {
			fmt.Fprintf(out, "    %-6s %-10s %-34s %8.0f %6s %9.2f\n", kind, "", fmt.Sprintf("(%.0f more, each < 0.01)", smallRows), small, "", small/float64(n))
		}
	}
	rows("write", d.writes, d.conflicts)
	rows("read", d.reads, nil)
}
