// Command render benchmarks the inter-operator's template renderer
// (internal/render) on a typical template: the provision template of the
// sample catalog's plan "small" (examples/catalog/plan-small.yaml: three
// objects from one gotemplate), with the variables the provisioner passes
// (.service, .plan, .instance from the sample SFService and SFPlan and an
// SFServiceInstance with realistic ids, context and parameters).
//
// It renders single-threaded and with GOMAXPROCS goroutines, each for
// -duration, alternating for -rounds rounds (the machine is shared: the
// median round counts), after a warm-up that fills the parsed-template
// cache (as in the provisioner, where a plan is parsed once), and prints
// renders/s and µs/render (wall time per render, and per goroutine), plus
// allocations per render of the single-threaded runs.
//
//	go run ./bench/render
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
	"github.com/marketplane/marketplane/internal/render"
)

// config is what the flags set.
type config struct {
	// catalog is the directory of the sample catalog.
	catalog string
	// duration is how long each measurement renders.
	duration time.Duration
	// warmup is how many renders precede the measurements.
	warmup int
	// rounds is how often each measurement is taken.
	rounds int
}

func main() {
	var c config
	flag.StringVar(&c.catalog, "catalog", "examples/catalog", "directory of the sample catalog (service.yaml, plan-small.yaml)")
	flag.DurationVar(&c.duration, "duration", time.Second, "how long each measurement renders")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds of each measurement; the median counts")
	flag.IntVar(&c.warmup, "warmup", 200, "renders before the measurements")
	flag.Parse()
	if err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/render:", err)
		os.Exit(2)
	}
}

// result is one measurement.
type result struct {
	goroutines int
	renders    int64
	elapsed    time.Duration
}

func (r result) perSecond() float64 { return float64(r.renders) / r.elapsed.Seconds() }

// microsPerRender is the wall time per render, in µs.
func (r result) microsPerRender() float64 {
	return float64(r.elapsed.Microseconds()) / float64(r.renders)
}

func run(ctx context.Context, c config, out io.Writer) error {
	in, err := typicalInput(c.catalog)
	if err != nil {
		return err
	}
	r := render.New()
	// The objects the template must render: a render that goes wrong
	// must not pass for a fast one.
	objs, err := r.RenderObjects(ctx, in)
	if err != nil {
		return fmt.Errorf("render the typical template: %w", err)
	}
	if c.rounds < 1 || c.duration <= 0 {
		return errors.New("-rounds and -duration must be positive")
	}
	if len(objs) != 3 {
		return fmt.Errorf("the typical template rendered %d objects, want 3 (Namespace, ResourceQuota, the credentials Namespace)", len(objs))
	}
	for i := 0; i < c.warmup; i++ {
		if _, err := r.RenderObjects(ctx, in); err != nil {
			return err
		}
	}

	procs := goruntime.GOMAXPROCS(0)
	fmt.Fprintf(out, "bench/render: provision template of plan %q (%s), %d objects per render\n",
		"small", filepath.Join(c.catalog, "plan-small.yaml"), len(objs))
	fmt.Fprintf(out, "GOMAXPROCS=%d NumCPU=%d; %d rounds of %s single-threaded and %s with %d goroutines, alternating (median round); %d warm-up renders\n\n",
		procs, goruntime.NumCPU(), c.rounds, c.duration, c.duration, procs, c.warmup)

	var singles, parallels []result
	var mallocs, bytes uint64
	for range c.rounds {
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		single, err := measure(ctx, r, in, 1, c.duration)
		if err != nil {
			return err
		}
		goruntime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		bytes += after.TotalAlloc - before.TotalAlloc
		parallel, err := measure(ctx, r, in, procs, c.duration)
		if err != nil {
			return err
		}
		singles, parallels = append(singles, single), append(parallels, parallel)
	}
	single, parallel := median(singles), median(parallels)
	var renders int64
	for _, s := range singles {
		renders += s.renders
	}

	fmt.Fprintf(out, "%-28s %12s %12s %22s\n", "", "renders/s", "µs/render", "µs/render/goroutine")
	for _, m := range []struct {
		name string
		r    result
	}{{"single-threaded", single}, {fmt.Sprintf("%d goroutines (GOMAXPROCS)", procs), parallel}} {
		fmt.Fprintf(out, "%-28s %12.0f %12.1f %22.1f\n", m.name, m.r.perSecond(), m.r.microsPerRender(), m.r.microsPerRender()*float64(m.r.goroutines))
	}
	fmt.Fprintf(out, "\nrounds (renders/s): single-threaded %s; %d goroutines %s\n", rates(singles), procs, rates(parallels))
	fmt.Fprintf(out, "single-threaded: %.0f allocations, %.1f KiB per render; parallel speed-up %.2fx (the machine is shared)\n",
		float64(mallocs)/float64(renders), float64(bytes)/float64(renders)/1024, parallel.perSecond()/single.perSecond())
	st := r.Stats()
	fmt.Fprintf(out, "template parses: %d (the parsed template is cached by content hash), abandoned renders: %d\n", st.TemplateParses, st.Abandoned)
	if st.TemplateParses != 1 {
		return fmt.Errorf("the template was parsed %d times, want once", st.TemplateParses)
	}
	return nil
}

// median returns the round with the median rate.
func median(rs []result) result {
	s := append([]result(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].perSecond() < s[j].perSecond() })
	return s[len(s)/2]
}

// rates lists the rates of the rounds.
func rates(rs []result) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.0f", r.perSecond())
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// measure renders in from the given number of goroutines for d and
// counts the renders.
func measure(ctx context.Context, r *render.Renderer, in render.Input, goroutines int, d time.Duration) (result, error) {
	var wg sync.WaitGroup
	counts := make([]int64, goroutines)
	errs := make([]error, goroutines)
	start := time.Now()
	deadline := start.Add(d)
	for g := 0; g < goroutines; g++ {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				// Check the clock every few renders only: time.Now is
				// cheap, but not free next to a render.
				for range 8 {
					if _, err := r.RenderObjects(ctx, in); err != nil {
						errs[g] = err
						return
					}
					counts[g]++
				}
			}
		})
	}
	wg.Wait()
	res := result{goroutines: goroutines, elapsed: time.Since(start)}
	for _, n := range counts {
		res.renders += n
	}
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if res.renders == 0 {
		return res, errors.New("no render finished")
	}
	return res, nil
}

// typicalInput is the render of the sample plan "small"'s provision
// template for a realistic instance.
func typicalInput(dir string) (render.Input, error) {
	svc := &osbv1alpha1.SFService{}
	plan := &osbv1alpha1.SFPlan{}
	if err := readYAML(filepath.Join(dir, "service.yaml"), svc); err != nil {
		return render.Input{}, err
	}
	if err := readYAML(filepath.Join(dir, "plan-small.yaml"), plan); err != nil {
		return render.Input{}, err
	}
	tmpl, ok := plan.Template(osbv1alpha1.ActionProvision)
	if !ok {
		return render.Input{}, fmt.Errorf("%s has no provision template", plan.Name)
	}
	// What the broker records for a provision request from a Kubernetes
	// platform, after the provisioner scheduled it: ids as UUIDs, the OSB
	// context, parameters within the plan's schema.
	const id = "6f1d2b7e-3c4a-4e59-9b8d-0a2c4e6f8b1d"
	created := metav1.NewTime(time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC))
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: id, Namespace: "sf-" + id, UID: "2b9c0e4a-5f71-4d3b-8a6e-1c7f9d2e4b60",
			ResourceVersion: "184467", Generation: 2, CreationTimestamp: created,
			Labels:      map[string]string{osbv1alpha1.LabelLastOperation: string(osbv1alpha1.StateInQueue)},
			Annotations: map[string]string{osbv1alpha1.AnnotationPlanHash: "5d41402abc4b2a76b9719d911017c592"},
			Finalizers:  []string{osbv1alpha1.FinalizerBroker, osbv1alpha1.FinalizerInteroperator},
		},
		Spec: osbv1alpha1.SFServiceInstanceSpec{
			InstanceID: id, ServiceID: svc.Spec.ID, PlanID: plan.Spec.ID,
			OrganizationGUID: "1a2b3c4d-0000-4000-8000-00000000a001", SpaceGUID: "1a2b3c4d-0000-4000-8000-00000000b002",
			Context:    rawJSON(`{"platform":"kubernetes","namespace":"team-a","clusterid":"c-7f3e9a","instance_name":"orders-db"}`),
			Parameters: rawJSON(`{"cpu":"4","memory":"8Gi","pods":40}`),
			ClusterID:  "target",
		},
		Status: osbv1alpha1.SFServiceInstanceStatus{State: osbv1alpha1.StateInQueue},
	}
	vals, err := render.Values(svc, plan, inst, (*osbv1alpha1.SFServiceBinding)(nil))
	if err != nil {
		return render.Input{}, err
	}
	vals[provisioner.VarInstanceID] = provisioner.InstanceID(inst.Namespace, inst.Name)
	return render.Input{Template: tmpl, Values: vals}, nil
}

func readYAML(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the sample catalog: %w", err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

func rawJSON(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }
