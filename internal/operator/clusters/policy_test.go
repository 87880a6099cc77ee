package clusters_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// waitPolicyDenied waits until the request is Denied by rule.
func waitPolicyDenied(t *testing.T, ns, name, rule string) {
	t.Helper()
	cr := waitRequestPhase(t, ns, name, clustersv1alpha1.RequestDenied, clusters.ReasonPolicyViolation)
	if _, _, msg := optest.ReadyReason(cr.Status.Conditions); !strings.Contains(msg, fmt.Sprintf("rule %q", rule)) {
		t.Errorf("ClusterRequest %s: message %q does not name rule %q", name, msg, rule)
	}
	if cr.Status.Cluster != nil {
		t.Errorf("ClusterRequest %s: denied, but granted %v", name, cr.Status.Cluster)
	}
}

// TestClusterRequestLimits is the attack of issue #10 item 1 "a provider
// can create ClusterRequests (each a new API server) without any limit":
// with the default policy an Exclusive (mcp) request is denied and nothing
// is provisioned, a platform request is denied, and a provider gets at
// most 8 requests. Raising spec.accessPolicy.maxExclusiveClusters and
// deleting a request re-evaluate the denied ones.
func TestClusterRequestLimits(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ctx := t.Context()
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "cr-limits"}}
	sp.Spec.Image = "example.com/cr-limits:v1"
	if err := optest.Platform.Client.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	ns := optest.NewProviderNamespace(t, "sp-cr-limits", policy.KindServiceProvider, sp)
	fake := &fakeProvisioner{ns: ns}
	startSchedulers(t, ns, clusters.WithProvisioner(clusters.ProvisionerFns{ProvisionFn: fake.provision, ReleaseFn: fake.release}),
		clusters.WithProvisionInterval(300*time.Millisecond))
	optest.RegisterCluster(t, ns, "shared", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	optest.WaitClusterReason(t, ns, "shared", metav1.ConditionTrue, clusters.ReasonReachable, 30*time.Second)

	createRequest(t, ns, "own-mcp", clustersv1alpha1.PurposeMCP)
	waitPolicyDenied(t, ns, "own-mcp", policy.RuleMaxExclusive)
	createRequest(t, ns, "platform", clustersv1alpha1.PurposePlatform)
	waitPolicyDenied(t, ns, "platform", policy.RuleNoPlatformRequest)
	fake.mu.Lock()
	provisions := fake.provisions
	fake.mu.Unlock()
	if provisions != 0 {
		t.Fatalf("the provisioner was asked %d times for denied requests, want 0", provisions)
	}

	// The platform operator allows one exclusive cluster.
	cur := &providerv1alpha1.ServiceProvider{}
	if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(sp), cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.AccessPolicy = &providerv1alpha1.AccessPolicy{MaxExclusiveClusters: ptr.To[int32](1)}
	if err := optest.Platform.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitRequestPhase(t, ns, "own-mcp", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)

	// own-mcp and platform count: six more fit under the default of 8.
	for i := range 7 {
		createRequest(t, ns, fmt.Sprintf("wl-%d", i), clustersv1alpha1.PurposeWorkload)
	}
	for i := range 6 {
		waitRequestPhase(t, ns, fmt.Sprintf("wl-%d", i), clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
	}
	waitPolicyDenied(t, ns, "wl-6", policy.RuleMaxClusterRequests)

	// One goes, the denied one gets its place.
	if err := optest.Platform.Client.Delete(ctx, &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: "wl-0", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	waitRequestPhase(t, ns, "wl-6", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
}
