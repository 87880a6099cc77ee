package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/bench/internal/landscaperun"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// supervisorPID returns the PID of the landscape's supervisor, the root
// of the process tree measured.
func supervisorPID(l *landscaperun.Landscape) (int, error) {
	state, err := controlplane.ReadState(l.Dir)
	if err != nil {
		return 0, err
	}
	if state.Supervisor == nil {
		return 0, fmt.Errorf("state.json of %s records no supervisor", l.Dir)
	}
	return state.Supervisor.PID, nil
}

// namespaces returns the n namespaces of the MCPs, numbered with as many
// digits as the largest number needs (two at least).
func namespaces(n int) []string {
	width := max(2, len(strconv.Itoa(n-1)))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%0*d", nsPrefix, width, i)
	}
	return names
}

// createMCPs creates n namespaces and then, all at once, an MCP in each;
// it returns the namespaces and when the MCPs' creation began.
func createMCPs(ctx context.Context, l *landscaperun.Landscape, n int) ([]string, time.Time, error) {
	names := namespaces(n)
	for _, ns := range names {
		if err := l.Onboarding.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, time.Time{}, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, ns := range names {
		wg.Go(func() { errs[i] = l.Onboarding.Create(ctx, newMCP(ns)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("create ManagedControlPlane %s/%s: %w", names[i], mcpName, err)
		}
	}
	return names, start, nil
}

// newMCP is the quick start's ManagedControlPlane in namespace ns.
func newMCP(ns string) *corev2alpha1.ManagedControlPlane {
	return &corev2alpha1.ManagedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mcpName},
		Spec: corev2alpha1.ManagedControlPlaneSpec{IAM: corev2alpha1.IAMConfig{Tokens: []corev2alpha1.TokenConfig{{
			Name:        "admin",
			TokenConfig: clustersv1alpha1.TokenConfig{RoleRefs: []common.RoleRef{{Kind: "ClusterRole", Name: "cluster-admin"}}},
		}}}},
	}
}

// watcher returns a client of the onboarding cluster that can watch.
func watcher(l *landscaperun.Landscape) (client.WithWatch, error) {
	scheme, err := install.NewScheme()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(l.Dir, "kubeconfigs", "onboarding.kubeconfig"))
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of onboarding: %w", err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client of onboarding: %w", err)
	}
	return c, nil
}

// retryAfter is how long waitReady waits after a failed list or watch.
const retryAfter = time.Second

// waitReady waits until every MCP reports Ready and returns, per MCP, when
// it was first seen Ready after start. It lists the MCPs and then watches
// them: polling lists of hundreds of MCPs would cost the onboarding API
// server more than the MCPs measured do.
func waitReady(ctx context.Context, c client.WithWatch, names []string, start time.Time, timeout time.Duration) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := newReadiness(names, start)
	for r.pending > 0 && ctx.Err() == nil {
		list := &corev2alpha1.ManagedControlPlaneList{}
		if err := c.List(ctx, list); err != nil {
			r.last = err
			pause(ctx, retryAfter)
			continue
		}
		for i := range list.Items {
			r.see(&list.Items[i])
		}
		if r.pending == 0 {
			break
		}
		w, err := c.Watch(ctx, &corev2alpha1.ManagedControlPlaneList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			r.last = err
			pause(ctx, retryAfter)
			continue
		}
		for ev := range w.ResultChan() {
			if mcp, ok := ev.Object.(*corev2alpha1.ManagedControlPlane); ok {
				r.see(mcp)
			}
			if r.pending == 0 {
				break
			}
		}
		w.Stop()
	}
	if r.pending > 0 {
		return nil, r.err(ctx, timeout)
	}
	return r.after, nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// readiness records when each MCP was first seen Ready.
type readiness struct {
	names   []string
	index   map[string]int
	start   time.Time
	after   []time.Duration
	pending int
	// last is the last error of a list or watch.
	last error
}

func newReadiness(names []string, start time.Time) *readiness {
	r := &readiness{names: names, index: make(map[string]int, len(names)), start: start,
		after: make([]time.Duration, len(names)), pending: len(names)}
	for i, ns := range names {
		r.index[ns] = i
	}
	return r
}

// see records mcp's readiness, if it is one of the MCPs awaited.
func (r *readiness) see(mcp *corev2alpha1.ManagedControlPlane) {
	i, ok := r.index[mcp.Namespace]
	if !ok || mcp.Name != mcpName || r.after[i] != 0 {
		return
	}
	if apimeta.IsStatusConditionTrue(mcp.Status.Conditions, common.ConditionTypeReady) {
		r.after[i] = time.Since(r.start)
		r.pending--
	}
}

// err says which MCPs did not become Ready in time.
func (r *readiness) err(ctx context.Context, timeout time.Duration) error {
	var left []string
	for i, ns := range r.names {
		if r.after[i] == 0 {
			left = append(left, ns)
		}
	}
	why := fmt.Sprintf("not within %s", timeout)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = fmt.Sprintf("interrupted after %s", time.Since(r.start).Round(time.Second))
	}
	err := fmt.Errorf("waiting for every ManagedControlPlane Ready: %s; %d of %d not Ready: %s", why, len(left), len(r.names), abbreviate(left))
	if r.last != nil {
		err = fmt.Errorf("%w; last error: %w", err, r.last)
	}
	return err
}

// abbreviate joins names, at most ten of them.
func abbreviate(names []string) string {
	const most = 10
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// gonePoll is how often deleteAll lists the MCPs left.
const gonePoll = time.Second

// deleteAll deletes the MCPs and their namespaces and waits until the MCPs
// are gone.
func deleteAll(ctx context.Context, l *landscaperun.Landscape, names []string, timeout time.Duration) error {
	for _, ns := range names {
		if err := l.Onboarding.Delete(ctx, &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mcpName}}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete ManagedControlPlane %s/%s: %w", ns, mcpName, err)
		}
	}
	left := 0
	err := wait.PollUntilContextTimeout(ctx, gonePoll, timeout, true, func(ctx context.Context) (bool, error) {
		list := &corev2alpha1.ManagedControlPlaneList{}
		if err := l.Onboarding.List(ctx, list); err != nil {
			return false, nil
		}
		left = len(list.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the ManagedControlPlanes to be gone: %w; %d left", err, left)
	}
	for _, ns := range names {
		if err := l.Onboarding.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete namespace %s: %w", ns, err)
		}
	}
	return nil
}

// checkGone waits until none of the processes added is alive and
// state.json records no cluster provisioned for a request.
func checkGone(ctx context.Context, l *landscaperun.Landscape, added map[int]string, timeout time.Duration) error {
	var left []string
	err := landscaperun.Poll(ctx, timeout, "the MCPs' processes to end", func() (bool, error) {
		left = left[:0]
		for pid, name := range added {
			if _, err := os.Stat(fmt.Sprintf("%s/%d", procPath, pid)); err == nil {
				left = append(left, fmt.Sprintf("%s (pid %d)", name, pid))
			}
		}
		state, err := controlplane.ReadState(l.Dir)
		if err != nil {
			return false, nil
		}
		for name, rec := range state.Clusters {
			if rec.Request != nil {
				left = append(left, "cluster "+name+" in state.json")
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		slices.Sort(left)
		return fmt.Errorf("%w; still there: %s", err, abbreviate(left))
	}
	return nil
}
