package main

// The direct phase (issue #15) is the yardstick of the broker phase: the
// same provision+bind of -n instances of the asynchronous plan, by
// -workers goroutines, with the broker stopped and its work done by the
// benchmark through the API alone. Per instance it writes what the broker
// writes (the namespace, the SFServiceInstance with the broker's
// finalizer, operation annotation and last-operation label; once the
// instance succeeded, the SFServiceBinding with the broker's and the
// provisioner's finalizers) and reads the binding's response Secret; one
// watch of every SFServiceInstance and one of every SFServiceBinding stand
// for the broker's two informers. What the broker's phase costs beyond
// this phase is the broker's own share: OSB over HTTP, last_operation
// polls, its cache and its checks.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/bench/internal/brokerobj"
	"github.com/marketplane/marketplane/bench/internal/parallel"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// directInstancePrefix names the direct phase's instances.
const directInstancePrefix = "dr"

// directPhase runs the yardstick after the broker phase, whose rate it
// compares with.
func (h *harness) directPhase(ctx context.Context, rep *report) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	instances, bindings := newTracker(), newTracker()
	if err := instances.watchKind(ctx, h.client, &osbv1alpha1.SFServiceInstanceList{}, ""); err != nil {
		return err
	}
	if err := bindings.watchKind(ctx, h.client, &osbv1alpha1.SFServiceBindingList{}, ""); err != nil {
		return err
	}
	ids := names(directInstancePrefix, h.c.n)
	countsBefore, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	cpuBefore := cpuSeconds()
	elapsed, err := parallel.Run(ctx, h.c.workers, len(ids), func(ctx context.Context, i int) error {
		return h.provisionAndBindDirectly(ctx, instances, bindings, ids[i])
	})
	if err != nil {
		return fmt.Errorf("direct provision+bind: %w", err)
	}
	perSecond := float64(len(ids)) / elapsed.Seconds()
	fmt.Fprintf(h.out, "\ndirect: the broker phase's provision+bind without the broker (its objects written by %d goroutines through the API, watched; the broker stopped)\n", h.c.workers)
	fmt.Fprintf(h.out, "  provision+bind: %d instances in %s: %.1f instances/s  (÷ provisioner-only %.1f = %.3f)\n",
		len(ids), elapsed.Round(time.Millisecond), perSecond, rep.loadPerSecond, perSecond/rep.loadPerSecond)
	if rep.broker != nil && perSecond > 0 {
		rep.broker.ratio = rep.broker.perSecond / perSecond
		fmt.Fprintf(h.out, "  through the broker ÷ direct: %.1f / %.1f = %.3f  (target ≥ %.1f×: %s; the broker's own share of a provision+bind: %.0f %%)\n",
			rep.broker.perSecond, perSecond, rep.broker.ratio, targetBrokerRatio, verdict(rep.broker.ratio >= targetBrokerRatio), 100*(1-rep.broker.ratio))
	}
	countsAfter, err := scrapeAll(ctx, h.rs)
	if err != nil {
		return err
	}
	printCPU(h.out, "direct provision+bind", cpuBefore, cpuSeconds(), elapsed)
	printPerInstance(h.out, countsAfter.minus(countsBefore), len(ids))
	return nil
}

// provisionAndBindDirectly writes what the broker writes for a provision
// of id, waits until the instance succeeded, writes what the broker writes
// for a bind, waits until the binding succeeded and reads its response.
func (h *harness) provisionAndBindDirectly(ctx context.Context, instances, bindings *tracker, id string) error {
	key := sf.InstanceKey(id)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        key.Namespace,
		Labels:      map[string]string{sf.LabelManagedBy: sf.ManagedByBroker},
		Annotations: map[string]string{sf.AnnotationInstanceID: id},
	}}
	if err := h.client.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns.Name, err)
	}
	inst := brokerobj.Instance(key, id, serviceID, asyncPlanID)
	// The broker's operation annotation, which the load phase leaves out.
	inst.Annotations = map[string]string{sf.AnnotationOperation: "create-1"}
	ie := instances.expect(key.Name)
	if err := h.client.Create(ctx, inst); err != nil {
		return fmt.Errorf("create instance %s: %w", id, err)
	}
	if _, err := instances.waitAll(ctx, []*entry{ie}, h.c.timeout); err != nil {
		return err
	}

	bid := id + "-b"
	bkey := sf.BindingKey(id, bid)
	b := &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: bkey.Namespace, Name: bkey.Name,
			Finalizers:  []string{osbv1alpha1.FinalizerBroker, osbv1alpha1.FinalizerProvisioner},
			Annotations: map[string]string{sf.AnnotationOperation: "create-1"},
			Labels:      map[string]string{osbv1alpha1.LabelLastOperation: string(osbv1alpha1.StateInQueue)},
		},
		Spec: osbv1alpha1.SFServiceBindingSpec{
			ID: bid, InstanceID: id, PlanID: asyncPlanID, ServiceID: serviceID, AppGUID: "bench-app",
			BindResource: &runtime.RawExtension{Raw: []byte(`{"app_guid":"bench-app"}`)},
		},
	}
	be := bindings.expect(bkey.Name)
	if err := h.client.Create(ctx, b); err != nil {
		return fmt.Errorf("create binding %s: %w", bid, err)
	}
	if _, err := bindings.waitAll(ctx, []*entry{be}, h.c.timeout); err != nil {
		return err
	}
	if be.secret == "" {
		return fmt.Errorf("binding %s succeeded without a response Secret", bid)
	}
	sec := &corev1.Secret{}
	if err := h.client.Get(ctx, client.ObjectKey{Namespace: bkey.Namespace, Name: be.secret}, sec); err != nil {
		return fmt.Errorf("read the response Secret of binding %s: %w", bid, err)
	}
	if _, ok := sec.Data[osbv1alpha1.BindingSecretResponseKey]; !ok {
		return fmt.Errorf("the response Secret of binding %s has no %q", bid, osbv1alpha1.BindingSecretResponseKey)
	}
	return nil
}
