// Command broker benchmarks the OSB broker's two hot read paths, GET
// /v2/catalog and GET .../last_operation, against a bare net/http handler
// that serves the same bytes, in the same run, over loopback with
// keep-alive connections.
//
// It starts a real API server (pkg/testenv; both the platform and the
// onboarding role), registers a catalog of 5 offerings × 3 plans with
// parameter schemas, records one provisioned instance, runs the broker
// process (internal/broker/app) against it, and measures:
//
//   - throughput: closed loop, -workers concurrent clients for -duration,
//     bare and broker back to back for -rounds rounds (alternating which
//     goes first); the median req/s and the median of the per-round
//     broker/bare ratios count, so that the load of other processes on the
//     machine cancels out as far as it can;
//   - latency: open loop at a fixed -rate for -latency-duration, timed from
//     each request's scheduled start (so queueing counts), p50 and p99;
//     -latency-rounds alternating runs each, the run with the median p99
//     counts.
//
// Targets (issue #6): broker req/s ≥ 0.8 × bare req/s; broker p99 ≤ 5 ms at
// 1,000 req/s. With -strict a missed target makes the exit status 1.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./bench/broker
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/app"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/pkg/testenv"
)

const (
	user       = "bench"
	password   = "bench-password"
	instanceID = "0b1f5c2e-7d3a-4b8e-9f10-2c3d4e5f6a7b"
	namespace  = "interoperator"
)

type config struct {
	duration, latencyDuration time.Duration
	workers, rounds           int
	latencyRounds             int
	rate                      int
	strict                    bool
	cpuProfile                string
}

func main() {
	var c config
	flag.DurationVar(&c.duration, "duration", 3*time.Second, "length of one throughput round")
	flag.DurationVar(&c.latencyDuration, "latency-duration", 5*time.Second, "length of the fixed-rate latency run")
	flag.IntVar(&c.workers, "workers", 16, "concurrent clients of the throughput rounds")
	flag.IntVar(&c.rounds, "rounds", 5, "throughput rounds per server (alternating which goes first)")
	flag.IntVar(&c.latencyRounds, "latency-rounds", 3, "fixed-rate latency runs per server (alternating); the median p99 counts")
	flag.IntVar(&c.rate, "rate", 1000, "requests per second of the latency run")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 when a target is missed")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the measurements (client and servers) to this file")
	flag.Parse()
	ok, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/broker:", err)
		os.Exit(2)
	}
	if !ok && c.strict {
		os.Exit(1)
	}
}

func run(c config) (bool, error) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fmt.Println("starting an API server (etcd + kube-apiserver) ...")
	cluster, err := testenv.New(testenv.WithName("broker-bench"))
	if err != nil {
		return false, err
	}
	defer func() { _ = cluster.Stop() }()
	if err := seed(ctx, cluster.Client); err != nil {
		return false, err
	}
	kubeconfig, err := cluster.KubeconfigPath()
	if err != nil {
		return false, err
	}
	brokerURL, stopBroker, err := startBroker(ctx, kubeconfig)
	if err != nil {
		return false, err
	}
	defer stopBroker()

	client := newClient(c.workers * 2)
	catalogPath := "/v2/catalog"
	loPath := "/v2/service_instances/" + instanceID + "/last_operation?operation=create-1&service_id=bench-svc-0&plan_id=bench-plan-0-0"
	catalogBody, err := waitFor(client, brokerURL+catalogPath, func(b []byte) bool { return len(b) > 1000 })
	if err != nil {
		return false, fmt.Errorf("catalog: %w", err)
	}
	loBody, err := waitFor(client, brokerURL+loPath, func(b []byte) bool { return string(b) == `{"state":"succeeded","description":"ready"}` })
	if err != nil {
		return false, fmt.Errorf("last_operation: %w", err)
	}
	bareURL, stopBare, err := startBare(catalogBody, loBody)
	if err != nil {
		return false, err
	}
	defer stopBare()

	fmt.Printf("\nOSB broker vs bare net/http handler, same bytes, loopback, keep-alive, GOMAXPROCS=%d\n", runtimeProcs())
	fmt.Printf("throughput: %d workers × %s × %d rounds each (alternating; median req/s and median of the per-round ratios)\n", c.workers, c.duration, c.rounds)
	fmt.Printf("latency: %d req/s × %s × %d runs each (alternating; timed from the scheduled start; median run by p99)\n", c.rate, c.latencyDuration, c.latencyRounds)
	fmt.Printf("catalog body %d bytes; last_operation body %d bytes\n\n", len(catalogBody), len(loBody))
	fmt.Printf("%-15s %-7s %10s %9s %9s %9s %7s\n", "endpoint", "server", "req/s", "p50", "p99", "max", "errors")
	if c.cpuProfile != "" {
		stop, err := startCPUProfile(c.cpuProfile)
		if err != nil {
			return false, err
		}
		defer stop()
	}
	allOK := true
	for _, ep := range []endpoint{{"catalog", catalogPath}, {"last_operation", loPath}} {
		ok := compare(client, c, ep, bareURL, brokerURL)
		allOK = allOK && ok
	}
	return allOK, nil
}

// startBroker runs the broker against kubeconfig on a free loopback port
// and returns its URL, once it is ready, and how to stop it.
func startBroker(ctx context.Context, kubeconfig string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	o := app.DefaultOptions()
	o.Kubeconfig, o.OnboardingKubeconfig = kubeconfig, kubeconfig
	o.Username, o.Password = user, password
	o.Listener, o.MetricsBindAddress = ln, "0"
	o.Verbosity = "ERROR"
	ready := make(chan struct{})
	o.Ready = func() { close(ready) }
	done := make(chan error, 1)
	bctx, bcancel := context.WithCancel(ctx)
	go func() { done <- app.Run(bctx, o) }()
	select {
	case <-ready:
	case err := <-done:
		bcancel()
		return "", nil, fmt.Errorf("broker: %w", err)
	}
	stop := func() {
		bcancel()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "the broker stopped with an error: %v\n", err)
		}
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// startBare serves the same bytes as the broker with the same headers and
// server settings, without the broker's checks, and returns its URL and
// how to stop it.
func startBare(catalogBody, loBody []byte) (string, func(), error) {
	bare := http.NewServeMux()
	serveBytes := func(b []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		}
	}
	bare.HandleFunc("GET /v2/catalog", serveBytes(catalogBody))
	bare.HandleFunc("GET /v2/service_instances/{id}/last_operation", serveBytes(loBody))
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	bareSrv := &http.Server{Handler: bare, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() { _ = bareSrv.Serve(bln) }()
	return "http://" + bln.Addr().String(), func() { _ = bareSrv.Close() }, nil
}

// startCPUProfile writes a CPU profile to path until the returned stop.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// endpoint is one measured path of both servers.
type endpoint struct{ name, path string }

// compare measures ep on the bare server and the broker, prints a row for
// each and the verdict, and says whether the broker met its targets.
func compare(client *http.Client, c config, ep endpoint, bareURL, brokerURL string) bool {
	// Warm up both servers (connections, caches).
	throughput(client, bareURL+ep.path, c.workers, time.Second)
	throughput(client, brokerURL+ep.path, c.workers, time.Second)
	// Rounds alternate which server goes first, and each round's
	// ratio compares two runs a few seconds apart, so that the load
	// of other processes on the machine cancels out as far as it can.
	var bareRuns, brokerRuns, ratios []float64
	var bareLats, brokerLats []latencies
	var errs [2]int64
	for i := 0; i < c.rounds; i++ {
		first, second := bareURL, brokerURL
		if i%2 == 1 {
			first, second = brokerURL, bareURL
		}
		r1, e1 := throughput(client, first+ep.path, c.workers, c.duration)
		r2, e2 := throughput(client, second+ep.path, c.workers, c.duration)
		bare, broker := r1, r2
		if i%2 == 1 {
			bare, broker = r2, r1
			e1, e2 = e2, e1
		}
		bareRuns, brokerRuns, ratios = append(bareRuns, bare), append(brokerRuns, broker), append(ratios, broker/bare)
		errs[0], errs[1] = errs[0]+e1, errs[1]+e2
	}
	for i := 0; i < c.latencyRounds; i++ {
		bareLats = append(bareLats, latency(client, bareURL+ep.path, c.rate, c.latencyDuration))
		brokerLats = append(brokerLats, latency(client, brokerURL+ep.path, c.rate, c.latencyDuration))
	}
	bareLat, brokerLat := medianLatency(bareLats), medianLatency(brokerLats)
	printRow := func(server string, rps float64, l latencies, e int64) {
		fmt.Printf("%-15s %-7s %10.0f %9s %9s %9s %7d\n", ep.name, server, rps, ms(l.p50), ms(l.p99), ms(l.max), e+l.errors)
	}
	printRow("bare", median(bareRuns), bareLat, errs[0])
	printRow("broker", median(brokerRuns), brokerLat, errs[1])
	ratio := median(ratios)
	ok := ratio >= 0.8 && brokerLat.p99 <= 5*time.Millisecond && errs[1]+brokerLat.errors == 0
	verdict := "PASS"
	if !ok {
		verdict = "MISS"
	}
	fmt.Printf("%-15s ratio   %9.2f×  (target ≥ 0.80×); broker p99 %s at %d req/s (target ≤ 5ms)  %s\n", ep.name, ratio, ms(brokerLat.p99), c.rate, verdict)
	fmt.Printf("%-15s rounds: req/s bare %v broker %v, ratios %v; p99 bare %v broker %v\n\n",
		"", rounded(bareRuns), rounded(brokerRuns), twoDigits(ratios), p99s(bareLats), p99s(brokerLats))
	return ok
}

// seed registers the benchmark catalog and one provisioned instance, as
// the broker and a provisioner would have left it.
func seed(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	schema := func(props ...string) *osbv1alpha1.Schema {
		p := map[string]any{}
		for _, name := range props {
			p[name] = map[string]any{"type": "string", "description": "the " + name + " of the instance", "maxLength": 63}
		}
		raw, err := json.Marshal(map[string]any{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": p, "additionalProperties": false})
		if err != nil {
			panic(err) // maps of strings and numbers always encode
		}
		return &osbv1alpha1.Schema{Parameters: &runtime.RawExtension{Raw: raw}}
	}
	for s := 0; s < 5; s++ {
		sid := fmt.Sprintf("bench-svc-%d", s)
		svc := &osbv1alpha1.SFService{
			ObjectMeta: metav1.ObjectMeta{Name: sid, Namespace: namespace},
			Spec: osbv1alpha1.SFServiceSpec{
				ID: sid, Name: fmt.Sprintf("service-%d", s), Description: "A benchmark service offering with a realistic description",
				Bindable: true, InstancesRetrievable: true, BindingsRetrievable: true, Tags: []string{"bench", "database", "sql"},
				Metadata: &runtime.RawExtension{Raw: []byte(`{"displayName":"Benchmark service","longDescription":"A service offering registered by the broker benchmark.","documentationUrl":"https://example.com/docs","providerDisplayName":"Marketplane"}`)},
			},
		}
		if err := c.Create(ctx, svc); err != nil {
			return err
		}
		for p := 0; p < 3; p++ {
			pid := fmt.Sprintf("bench-plan-%d-%d", s, p)
			plan := &osbv1alpha1.SFPlan{
				ObjectMeta: metav1.ObjectMeta{Name: pid, Namespace: namespace},
				Spec: osbv1alpha1.SFPlanSpec{
					ID: pid, Name: fmt.Sprintf("plan-%d", p), Description: "A benchmark plan", ServiceID: sid, Free: p == 0, Bindable: true,
					MaintenanceInfo: &osbv1alpha1.MaintenanceInfo{Version: "1.2.3", Description: "benchmark version"},
					Metadata:        &runtime.RawExtension{Raw: []byte(`{"bullets":["1 GiB memory","10 GiB disk"],"costs":[{"amount":{"usd":9.5},"unit":"MONTHLY"}]}`)},
					Schemas: &osbv1alpha1.ServiceSchemas{
						Instance: &osbv1alpha1.ServiceInstanceSchema{Create: schema("name", "size", "region", "tier"), Update: schema("size", "tier")},
						Binding:  &osbv1alpha1.ServiceBindingSchema{Create: schema("role")},
					},
					Templates: []osbv1alpha1.TemplateSpec{{Action: osbv1alpha1.ActionProvision, Type: osbv1alpha1.TypeGoTemplate, Content: "{}"}},
				},
			}
			if err := c.Create(ctx, plan); err != nil {
				return err
			}
		}
	}
	// The instance as the broker stores it: in the namespace it creates
	// for the instance (it serves instances from no other).
	key := sf.InstanceKey(instanceID)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        key.Namespace,
		Labels:      map[string]string{sf.LabelManagedBy: sf.ManagedByBroker},
		Annotations: map[string]string{sf.AnnotationInstanceID: instanceID},
	}}); err != nil {
		return err
	}
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Finalizers:  []string{osbv1alpha1.FinalizerBroker},
			Labels:      map[string]string{osbv1alpha1.LabelLastOperation: string(osbv1alpha1.StateInQueue)},
			Annotations: map[string]string{sf.AnnotationOperation: "create-1"},
		},
		Spec: osbv1alpha1.SFServiceInstanceSpec{
			InstanceID: instanceID, ServiceID: "bench-svc-0", PlanID: "bench-plan-0-0",
			Parameters: &runtime.RawExtension{Raw: []byte(`{"name":"orders","size":"small"}`)},
			Context:    &runtime.RawExtension{Raw: []byte(`{"platform":"cloudfoundry","organization_guid":"o","space_guid":"s"}`)},
		},
	}
	if err := c.Create(ctx, inst); err != nil {
		return err
	}
	inst.Status = osbv1alpha1.SFServiceInstanceStatus{State: osbv1alpha1.StateSucceeded, Description: "ready", ObservedGeneration: inst.Generation}
	return c.Status().Update(ctx, inst)
}

func newClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conns * 2,
			MaxIdleConnsPerHost: conns * 2,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

var authHeader = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))

func newRequest(url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", authHeader)
	req.Header.Set("X-Broker-API-Version", "2.17")
	return req
}

// get sends one request and reads the whole answer.
func get(c *http.Client, req *http.Request) ([]byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s", req.URL.Path, resp.StatusCode, b)
	}
	return b, nil
}

func waitFor(c *http.Client, url string, ok func([]byte) bool) ([]byte, error) {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		b, err := get(c, newRequest(url))
		if err == nil && ok(b) {
			return b, nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("unexpected body %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, errors.Join(errors.New("not ready within 30s"), last)
}

// throughput runs workers closed-loop clients for d and returns req/s and
// the error count.
func throughput(c *http.Client, url string, workers int, d time.Duration) (float64, int64) {
	var n, errs atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			req := newRequest(url)
			for time.Now().Before(stop) {
				if _, err := get(c, req); err != nil {
					errs.Add(1)
					continue
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), errs.Load()
}

type latencies struct {
	p50, p99, max time.Duration
	errors        int64
}

// latency sends requests at a fixed rate for d; each is timed from its
// scheduled start, so a server that falls behind pays for the queue.
func latency(c *http.Client, url string, rate int, d time.Duration) latencies {
	n := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	jobs := make(chan time.Time, n)
	results := make([]time.Duration, 0, n)
	var mu sync.Mutex
	var errs atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			req := newRequest(url)
			for scheduled := range jobs {
				_, err := get(c, req)
				took := time.Since(scheduled)
				if err != nil {
					errs.Add(1)
					continue
				}
				mu.Lock()
				results = append(results, took)
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		jobs <- at
	}
	close(jobs)
	wg.Wait()
	sort.Slice(results, func(i, j int) bool { return results[i] < results[j] })
	l := latencies{errors: errs.Load()}
	if len(results) > 0 {
		l.p50 = results[len(results)*50/100]
		l.p99 = results[len(results)*99/100]
		l.max = results[len(results)-1]
	}
	return l
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func rounded(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// medianLatency returns the run with the median p99.
func medianLatency(runs []latencies) latencies {
	s := append([]latencies(nil), runs...)
	sort.Slice(s, func(i, j int) bool { return s[i].p99 < s[j].p99 })
	return s[len(s)/2]
}

func p99s(runs []latencies) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = ms(r.p99)
	}
	return out
}

func twoDigits(v []float64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func runtimeProcs() int { return goruntime.GOMAXPROCS(0) }
