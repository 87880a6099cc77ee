package access_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/crdtest"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// ttlRequest is a token AccessRequest for the Cluster target in ns.
func ttlRequest(ns, name string, ttl *common.Duration) *clustersv1alpha1.AccessRequest {
	return &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clustersv1alpha1.AccessRequestSpec{
			ClusterRef: &common.ObjectReference{Name: "target", Namespace: ns},
			Token:      &clustersv1alpha1.TokenConfig{},
			TTL:        ttl,
		},
	}
}

// TestInvalidTTLIsRefused: the API server refuses spec.ttl "1 fortnight"
// with the rule's message (issue #10 item 3).
func TestInvalidTTLIsRefused(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "ar-ttl-rule")
	err := optest.Platform.Client.Create(t.Context(), ttlRequest(ns, "fortnight", ptr.To(common.Duration("1 fortnight"))))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.ttl") || !strings.Contains(err.Error(), "must be a non-negative duration") {
		t.Fatalf("create with spec.ttl %q: %v; want 422 naming spec.ttl with the rule's message", "1 fortnight", err)
	}
}

// TestInvalidTTLStopsOnlyItsRequest is issue #10 item 3: an AccessRequest
// whose spec.ttl is not a duration, stored before the API server checked
// it, made the controller's informer fail to list every AccessRequest, so
// that none progressed. Now the bad request decodes, is Denied with
// InvalidSpec naming the field (keeping its value verbatim), and the good
// request next to it is Granted.
//
// Not parallel: it drops the rule from the CRD all tests share, and
// TestInvalidTTLIsRefused, run alongside, saw "1 fortnight" stored. Go runs
// the parallel tests of a package after its sequential ones.
func TestInvalidTTLStopsOnlyItsRequest(t *testing.T) {
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "ar-ttl-tolerant")
	optest.RegisterCluster(t, ns, "target", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)

	// An API server from before the rule: the probe, refused by the rule
	// alone, must be accepted.
	// Objects go in unstructured, as kubectl sends them: the test's own
	// decoding must not depend on the type under test.
	probe := unstructuredRequest(t, ttlRequest(ns, "probe", ptr.To(common.Duration("often"))))
	restore := crdtest.DropValidations(t, optest.Platform.Config, "accessrequests.clusters.openmcp.cloud", []string{"spec", "ttl"},
		func(ctx context.Context) error {
			return optest.Platform.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		})

	bad := ttlRequest(ns, "fortnight", ptr.To(common.Duration("1 fortnight")))
	good := ttlRequest(ns, "hourly", common.DurationOf(time.Hour))
	for _, ar := range []*clustersv1alpha1.AccessRequest{bad, good} {
		if err := optest.Platform.Client.Create(t.Context(), unstructuredRequest(t, ar)); err != nil {
			t.Fatalf("create AccessRequest %s: %v", ar.Name, err)
		}
	}
	// An upgrade: today's CRD, with the rule, is installed over the
	// stored objects. The controller then starts: its first list holds
	// the bad one, and its status writes to it must still be accepted
	// (the API server ratchets the rule for the unchanged field).
	restore()
	startControllers(t, ns, "ar-ttl-tolerant")
	// Deleted while the controller still runs (it removes its finalizer),
	// so that no later test meets them.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), crdtest.Timeout)
		defer cancel()
		for _, ar := range []*clustersv1alpha1.AccessRequest{bad, good} {
			if err := optest.Platform.Client.Delete(ctx, ar); client.IgnoreNotFound(err) != nil {
				t.Errorf("delete AccessRequest %s: %v", ar.Name, err)
			}
		}
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list := &clustersv1alpha1.AccessRequestList{}
			err := optest.Platform.Client.List(ctx, list, client.InNamespace(ns))
			return err == nil && len(list.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("the AccessRequests of %s are not gone after %s", ns, crdtest.Timeout)
		}
	})
	granted := waitAccess(t, ns, good.Name, clustersv1alpha1.RequestGranted, access.ReasonGranted)
	if granted.Status.SecretRef == nil {
		t.Errorf("the good request is Granted without a Secret")
	}
	denied := waitAccess(t, ns, bad.Name, clustersv1alpha1.RequestDenied, access.ReasonInvalidSpec)
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(clustersv1alpha1.GroupVersion.WithKind("AccessRequest"))
	if err := optest.Platform.Client.Get(t.Context(), client.ObjectKeyFromObject(bad), raw); err != nil {
		t.Fatal(err)
	}
	if ttl, _, _ := unstructured.NestedString(raw.Object, "spec", "ttl"); ttl != "1 fortnight" {
		t.Errorf("spec.ttl is stored as %q; the controller's writes must keep it verbatim", ttl)
	}
	_, _, msg := optest.ReadyReason(denied.Status.Conditions)
	if !strings.Contains(msg, "spec.ttl") || !strings.Contains(msg, `"1 fortnight"`) {
		t.Errorf("Ready message %q; want it to name spec.ttl and its value", msg)
	}
	if denied.Status.SecretRef != nil {
		t.Errorf("the bad request has a Secret: %v", denied.Status.SecretRef)
	}

	// Denied is final until the spec changes: no hot loop. A loop of
	// status writes shows as a new resourceVersion of the bad request, a
	// loop of errors (retried with backoff) as a reconcile error, and a
	// loop of short requeues as more reconciles than the events still in
	// flight from the last writes of both requests: each one's status
	// write and its owned Secret, Role and RoleBinding can arrive after the
	// phase is seen, more so on a loaded machine.
	const inFlight = 8
	labels := map[string]string{"controller": "ar-ttl-tolerant"}
	before := testenv.ReconcileCount(t, "ar-ttl-tolerant")
	errorsBefore := testenv.MetricValue(t, "controller_runtime_reconcile_errors_total", labels)
	version := denied.ResourceVersion
	optest.Consistently(t, 3*time.Second, "no writes and no reconcile loop while nothing changes", func() error {
		now := &clustersv1alpha1.AccessRequest{}
		if err := optest.Platform.Client.Get(t.Context(), client.ObjectKeyFromObject(bad), now); err != nil {
			return err
		}
		if now.ResourceVersion != version {
			return fmt.Errorf("the Denied request was written again: resourceVersion %s → %s", version, now.ResourceVersion)
		}
		if n := testenv.MetricValue(t, "controller_runtime_reconcile_errors_total", labels); n > errorsBefore {
			return fmt.Errorf("reconcile errors went from %v to %v", errorsBefore, n)
		}
		if n := testenv.ReconcileCount(t, "ar-ttl-tolerant"); n > before+inFlight {
			return fmt.Errorf("reconciles went from %v to %v", before, n)
		}
		return nil
	})
}

// unstructuredRequest converts ar to an unstructured object.
func unstructuredRequest(t *testing.T, ar *clustersv1alpha1.AccessRequest) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ar)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(clustersv1alpha1.GroupVersion.WithKind("AccessRequest"))
	return u
}
