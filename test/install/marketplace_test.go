package install

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/charts"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// marketplacePackage is the marketplace's main package.
const marketplacePackage = "github.com/marketplane/marketplane/cmd/marketplane-marketplace"

// marketplaceRunNotReached are the permissions of the chart's
// marketplace-sources ClusterRole that TestMarketplaceInCluster may not see
// used, keyed as grant.key names them, with the reason.
var marketplaceRunNotReached = map[string]string{
	// client-go streams an informer's initial list as a watch
	// (sendInitialEvents); it falls back to "list" where the API server
	// does not stream lists.
	"list serviceproviders.openmcp.cloud cluster-wide":  "informer's initial list, streamed as a watch",
	"list clusterproviders.openmcp.cloud cluster-wide":  "informer's initial list, streamed as a watch",
	"list platformservices.openmcp.cloud cluster-wide":  "informer's initial list, streamed as a watch",
	"list sfservices.osb.servicefabrik.io cluster-wide": "informer's initial list, streamed as a watch",
	"list sfplans.osb.servicefabrik.io cluster-wide":    "informer's initial list, streamed as a watch",
}

// marketplaceObjects picks the chart's objects of component marketplace:
// the PlatformService and the RBAC for its run ServiceAccount.
func marketplaceObjects(t *testing.T, objs []*unstructured.Unstructured) (*providerv1alpha1.PlatformService, []*unstructured.Unstructured) {
	t.Helper()
	var ps *providerv1alpha1.PlatformService
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetLabels()["app.kubernetes.io/component"] != "marketplace" {
			continue
		}
		if u.GetKind() == "PlatformService" {
			ps = &providerv1alpha1.PlatformService{}
			fromUnstructured(t, u, ps)
		}
		out = append(out, u)
	}
	if ps == nil {
		t.Fatalf("the chart renders no PlatformService of component marketplace (%d objects of it)", len(out))
	}
	return ps, out
}

// TestMarketplaceInCluster installs the chart's marketplace as
// TestInterOperatorInCluster installs the inter-operator: the operator
// in-cluster with the chart's RBAC, the test's API server registered as the
// onboarding cluster, the chart's PlatformService and RBAC, and the
// marketplane-marketplace binary run as the operator's init Job and run
// Deployment would run it (their arguments, environment and ServiceAccount
// tokens). Init's AccessRequest within the PlatformService's access policy
// must be enough to install the Offering CRD and the viewer RBAC; run's
// must be enough to keep Offerings current from the SF catalog; a tenant
// with no rights of its own reads them. The audit log shows that nothing
// was refused and that the chart's marketplace-sources role is used.
func TestMarketplaceInCluster(t *testing.T) {
	testenv.SkipIfShort(t)
	objs, err := charts.Render(charts.WithExampleRegistry(nil))
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	oc := operatorObjects(t, objs)
	ps, mpObjects := marketplaceObjects(t, objs)

	dir := t.TempDir()
	testenv.BuildBinaries(t, dir, operatorPackage, marketplacePackage)
	apiArgs, auditLog := auditArgs(t, dir)
	c := testenv.Start(t, testenv.WithName("install-mp"), testenv.WithCRDs(), testenv.WithControllerManager(),
		testenv.WithAPIServerArgs(apiArgs...))
	oc.install(t, c)
	operatorRunning := startOperatorInCluster(t, c, oc, dir)
	registerOnboardingCluster(t, c, oc.ServiceAccount.Namespace, operatorRunning)

	ctx := t.Context()
	for _, u := range mpObjects {
		if err := c.Client.Create(ctx, u.DeepCopy()); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	base := "ps-" + ps.Name
	out := &testenv.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("marketplace output ends:\n%s", tail(out.String(), 12000))
		}
	})
	pc := runProviderInCluster(t, c, filepath.Join(dir, "marketplane-marketplace"), base, "marketplace", mpObjects, operatorRunning, out)
	initSA, runSA, running := pc.initSA, pc.runSA, pc.running
	eventually(t, "PlatformService "+ps.Name+" Ready", func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for Ready")
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(ps), ps); err != nil {
			return false, err.Error(), nil
		}
		cond := apimeta.FindStatusCondition(ps.Status.Conditions, string(providerv1alpha1.ConditionReady))
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == ps.Generation,
			fmt.Sprintf("generation %d, conditions %+v", ps.Generation, ps.Status.Conditions), nil
	})

	scenario := t.Run("OfferingsForTenants", func(t *testing.T) {
		const catalog = "mp-catalog"
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: catalog}}); err != nil {
			t.Fatal(err)
		}
		createTestCatalog(t, c, catalog)
		// A tenant: a ServiceAccount with no binding of its own.
		tenant := c.ActAs(t, "default", "tenant")
		name := "sf-" + catalog + "-install-test"
		eventually(t, "Offering "+name+" readable by a tenant", func(ctx context.Context) (bool, string, error) {
			running(t, "while waiting for the Offering")
			o := &marketplacev1alpha1.Offering{}
			if err := tenant.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
				return false, err.Error(), nil
			}
			return len(o.Spec.Plans) == 1 && o.Spec.Plans[0].Name == "small", fmt.Sprintf("plans %+v", o.Spec.Plans), nil
		})
	})
	running(t, "before the audit log was read")

	chartRoles := map[string]bool{}
	for _, o := range mpObjects {
		if o.GetKind() == "ClusterRole" || o.GetKind() == "Role" {
			chartRoles[o.GetName()] = true
		}
	}
	for _, sa := range []struct {
		account    *corev1.ServiceAccount
		notReached map[string]string
	}{{initSA, nil}, {runSA, marketplaceRunNotReached}} {
		t.Run("RBACAsUsed/"+sa.account.Name, func(t *testing.T) {
			granted := grantedTo(t, c, sa.account)
			t.Run("NoWildcardsNoClusterAdmin", granted.only(chartRoles).checkNoWildcards)
			user := serviceaccount.MakeUsername(sa.account.Namespace, sa.account.Name)
			checkGrantsUsed(t, user, granted, readAudit(t, auditLog, user), scenario, sa.notReached, func(g grant) bool { return chartRoles[g.role()] })
		})
	}
}
