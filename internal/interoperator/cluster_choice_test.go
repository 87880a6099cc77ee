package interoperator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// onboardingTenant returns a client of the onboarding cluster that acts
// as the ServiceAccount "tenant" of namespace ns with the rights the
// landscape's demo tenant has there: the built-in edit role, and the
// service kinds the provider operator aggregates into edit and view
// (tenantroles.go: get, list, watch on the kinds and their status;
// create, update, patch, delete on the kinds). This onboarding cluster
// runs no kube-controller-manager to aggregate them, so they are bound
// directly.
func onboardingTenant(t *testing.T, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	kinds := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + ":tenant-kinds"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{osbv1alpha1.GroupVersion.Group}, Resources: []string{"sfservicebindings", "sfservicebindings/status", "sfserviceinstances", "sfserviceinstances/status"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{osbv1alpha1.GroupVersion.Group}, Resources: []string{"sfservicebindings", "sfserviceinstances"}, Verbs: []string{"create", "update", "patch", "delete", "deletecollection"}},
		},
	}
	must(t, onboarding.Client.Create(ctx, kinds))
	t.Cleanup(func() { _ = onboarding.Client.Delete(context.Background(), kinds) })
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}
	for name, role := range map[string]string{"tenant-edit": "edit", "tenant-kinds": kinds.Name} {
		must(t, onboarding.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   subjects,
		}))
	}
	return onboarding.ActAs(t, ns, "tenant")
}

// tenantInstance creates, with the tenant's client c, an instance of plan
// "plan" of service "svc" in the env's namespace whose spec.clusterId is
// cluster ("" for none).
func (e *env) tenantInstance(t *testing.T, c client.Client, name, cluster string, mutate ...func(*osbv1alpha1.SFServiceInstance)) *osbv1alpha1.SFServiceInstance {
	t.Helper()
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec:       osbv1alpha1.SFServiceInstanceSpec{ServiceID: "svc", PlanID: "plan", ClusterID: cluster},
	}
	for _, m := range mutate {
		m(inst)
	}
	must(t, c.Create(context.Background(), inst))
	return inst
}

// choicePlan registers the plan "plan" of service "svc", whose instances
// request cpu, are placed by the clusterSelector template selector and
// provision a ConfigMap named after the instance.
func (e *env) choicePlan(t *testing.T, cpu, selector string) {
	t.Helper()
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{
		gotemplate(osbv1alpha1.ActionProvision, configMaps("cm-{{ .instance.metadata.name }}")),
		gotemplate(osbv1alpha1.ActionClusterSelector, selector),
	}, func(p *osbv1alpha1.SFPlan) {
		p.Spec.Context = &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"requests": {"cpu": %q}}`, cpu)}
	})
}

// waitReady waits until the instance's Ready condition has reason and
// returns the instance.
func (e *env) waitReady(t *testing.T, name, reason string) *osbv1alpha1.SFServiceInstance {
	t.Helper()
	var inst *osbv1alpha1.SFServiceInstance
	waitFor(t, fmt.Sprintf("instance %s to be Ready=False/%s", name, reason), func() bool {
		inst = e.instance(t, name)
		r := readyCondition(inst.Status.Conditions)
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == reason
	})
	return inst
}

// appliedFor counts what is on the target cluster for the instance with
// uid: Namespaces and ConfigMaps labelled with it, in any namespace.
func appliedFor(t *testing.T, uid types.UID) int {
	t.Helper()
	sel := client.MatchingLabels{provisioner.LabelInstanceUID: string(uid)}
	cms, nss := &corev1.ConfigMapList{}, &corev1.NamespaceList{}
	must(t, target.Client.List(context.Background(), cms, sel))
	must(t, target.Client.List(context.Background(), nss, sel))
	return len(cms.Items) + len(nss.Items)
}

// recount makes the SFCluster status controller count the instances of
// the SFCluster name again (a spec change that means nothing: it toggles
// schedulingLimitPercentage between unset and 100, which mean the same)
// and waits for that count; it returns the SFCluster.
func (e *env) recount(t *testing.T, name string) *resourcev1alpha1.SFCluster {
	t.Helper()
	c := e.sfcluster(t, name)
	generation := c.Generation
	// A merge patch of the spec alone: the controller writes the
	// SFCluster's finalizers and status meanwhile, which would make an
	// Update of the read copy conflict.
	base := c.DeepCopy()
	if c.Spec.SchedulingLimitPercentage == 0 {
		c.Spec.SchedulingLimitPercentage = 100
	} else {
		c.Spec.SchedulingLimitPercentage = 0
	}
	must(t, platform.Client.Patch(context.Background(), c, client.MergeFrom(base)))
	return e.waitSFCluster(t, name, "a status for the changed spec", func(c *resourcev1alpha1.SFCluster) bool {
		return c.Generation > generation && c.Status.ObservedGeneration == c.Generation
	})
}

// TestClusterChoice attacks the cluster an instance runs on through
// spec.clusterId, which tenants write, with a tenant's identity: moving a
// provisioned instance to another cluster, pinning instances to a
// cordoned cluster, to a cluster the plan's clusterSelector leaves out, to
// a full one, with a forged acceptance in the status. The API server
// refuses the move; the pins are refused before anything is applied, take
// no room on the cluster, and an accepted pin (a platform operator's)
// still works.
func TestClusterChoice(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{noCluster: true, configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.DefaultCluster = "open"
	}, setup: []interoperator.Option{fastClusterChecks}})
	shared := map[string]string{"tier": "shared"}
	e.registerCluster(t, "open", target.Kubeconfig, func(c *resourcev1alpha1.SFCluster) { c.Labels = shared })
	e.registerCluster(t, "cordoned", target.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Labels, c.Spec.Unschedulable = shared, true
	})
	e.registerCluster(t, "full", target.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Labels = shared
		c.Spec.TotalCapacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	})
	// Another tenant's cluster, say, or the platform's own.
	e.registerCluster(t, "dedicated", target.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Labels = map[string]string{"tier": "dedicated"}
	})
	e.createService(t, "svc")
	e.choicePlan(t, "1", "tier=shared")
	tenant := onboardingTenant(t, e.ns)

	// A platform operator pins an instance to "full", filling it: the pin
	// passes the filters and is accepted.
	e.createInstance(t, "filler", "svc", "plan", nil, onCluster("full"))
	filler := e.waitInstance(t, "filler", osbv1alpha1.StateSucceeded)
	if c := apimeta.FindStatusCondition(filler.Status.Conditions, provisioner.ConditionScheduled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != provisioner.ReasonPinned {
		t.Errorf("the accepted pin's Scheduled condition is %+v, want True/%s", c, provisioner.ReasonPinned)
	}

	t.Run("TenantCannotMoveAnInstance", func(t *testing.T) {
		// The attack: provisioned (and bound) on one cluster, then moved
		// to another, which would orphan the first cluster's objects and
		// leave the bindings' credentials there valid after unbind.
		e.tenantInstance(t, tenant, "mine", "")
		mine := e.waitInstance(t, "mine", osbv1alpha1.StateSucceeded)
		if mine.Spec.ClusterID != "open" {
			t.Fatalf("the tenant's instance was placed on %q, want the default cluster open", mine.Spec.ClusterID)
		}
		for what, patch := range map[string]string{
			"move to another cluster": `{"spec":{"clusterId":"dedicated"}}`,
			"remove the cluster":      `{"spec":{"clusterId":null}}`,
		} {
			err := tenant.Patch(ctx, mine.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "clusterId is immutable once set") {
				t.Errorf("%s: the tenant's patch returned %v; want 422 Invalid saying that clusterId is immutable", what, err)
			}
		}
		moved := e.instance(t, "mine")
		moved.Spec.ClusterID = "cordoned"
		if err := tenant.Update(ctx, moved); !apierrors.IsInvalid(err) {
			t.Errorf("the tenant's update to another cluster returned %v; want 422 Invalid", err)
		}
		// Nor can the tenant vouch for a cluster in the status.
		forged := e.instance(t, "mine")
		forged.Status.Conditions = nil
		if err := tenant.Status().Update(ctx, forged); !apierrors.IsForbidden(err) {
			t.Errorf("the tenant's status update returned %v; want 403 Forbidden", err)
		}
		if got := e.instance(t, "mine"); got.Spec.ClusterID != "open" {
			t.Errorf("spec.clusterId is %q after the attempts, want open", got.Spec.ClusterID)
		}
	})

	t.Run("PinsRefused", func(t *testing.T) {
		// The status a tenant sends along with a create is dropped by the
		// API server: a forged acceptance vouches for nothing.
		forge := func(i *osbv1alpha1.SFServiceInstance) {
			i.Status.Conditions = []metav1.Condition{{Type: provisioner.ConditionScheduled, Status: metav1.ConditionTrue,
				Reason: provisioner.ReasonPinned, Message: "forged", LastTransitionTime: metav1.Now()}}
			i.Status.Resources = []osbv1alpha1.Source{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", Namespace: "y"}}
		}
		refused := map[string]struct{ cluster, why string }{
			"to-cordoned":  {"cordoned", "takes no new instances: cordoned"},
			"to-dedicated": {"dedicated", `the plan's clusterSelector "tier=shared" does not select`},
		}
		uids := map[string]types.UID{}
		for name, tc := range refused {
			uids[name] = e.tenantInstance(t, tenant, name, tc.cluster, forge).UID
		}
		for name, tc := range refused {
			inst := e.waitInstance(t, name, osbv1alpha1.StateFailed)
			r := readyCondition(inst.Status.Conditions)
			if r == nil || r.Reason != string(provisioner.ReasonClusterNotAllowed) || !strings.Contains(r.Message, "SFCluster "+tc.cluster) || !strings.Contains(r.Message, tc.why) {
				t.Errorf("%s: Ready %+v; want reason %s naming SFCluster %s and why (%s)", name, r, provisioner.ReasonClusterNotAllowed, tc.cluster, tc.why)
			}
			if !strings.Contains(inst.Status.Error, tc.why) {
				t.Errorf("%s: status.error %q, want it to say why (%s) for last_operation", name, inst.Status.Error, tc.why)
			}
			if c := apimeta.FindStatusCondition(inst.Status.Conditions, provisioner.ConditionScheduled); c == nil || c.Status != metav1.ConditionFalse || c.Message == "forged" {
				t.Errorf("%s: Scheduled %+v, want False (the forged condition dropped)", name, c)
			}
			if len(inst.Status.Resources) != 0 || inst.Status.AppliedSpec != nil {
				t.Errorf("%s: resources %v, appliedSpec %v; want nothing applied", name, inst.Status.Resources, inst.Status.AppliedSpec)
			}
		}

		// A full cluster: the pin waits, like an instance the scheduler
		// cannot place, without the cluster's figures.
		uids["to-full"] = e.tenantInstance(t, tenant, "to-full", "full").UID
		inst := e.waitReady(t, "to-full", clusters.ReasonNoClusterAvailable)
		r := readyCondition(inst.Status.Conditions)
		if !strings.Contains(r.Message, "SFCluster full") || !strings.Contains(r.Message, "no room left for the plan's cpu request") || strings.Contains(r.Message, "requested of") {
			t.Errorf("to-full: Ready message %q; want it to name the cluster and the full resource, and no figures of other instances", r.Message)
		}
		if inst.Status.State == osbv1alpha1.StateSucceeded || len(inst.Status.Resources) != 0 {
			t.Errorf("to-full: state %q, resources %v; want nothing applied", inst.Status.State, inst.Status.Resources)
		}

		for name, uid := range uids {
			if n := appliedFor(t, uid); n != 0 {
				t.Errorf("%s: %d objects on the target cluster; want none", name, n)
			}
		}
		// None of them takes room: each cluster counts only what the
		// inter-operator placed or accepted.
		for name, want := range map[string]int32{"cordoned": 0, "dedicated": 0, "full": 1} {
			if c := e.recount(t, name); c.Status.ServiceInstanceCount != want {
				t.Errorf("SFCluster %s counts %d instances, want %d: %s", name, c.Status.ServiceInstanceCount, want, describeSFCluster(c))
			}
		}
		if c := e.sfcluster(t, "full"); !sameResources(c.Status.Requests, map[string]string{"cpu": "1"}) {
			t.Errorf("SFCluster full: requests %v, want the filler's cpu: 1", c.Status.Requests)
		}
		// A refused instance is deleted without going to the cluster.
		deleteAndWait(t, tenant, e.instance(t, "to-cordoned"))
	})

	t.Run("AcceptedPin", func(t *testing.T) {
		e.tenantInstance(t, tenant, "to-open", "open")
		inst := e.waitInstance(t, "to-open", osbv1alpha1.StateSucceeded)
		if c := apimeta.FindStatusCondition(inst.Status.Conditions, provisioner.ConditionScheduled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != provisioner.ReasonPinned || !strings.Contains(c.Message, "SFCluster open") {
			t.Errorf("Scheduled %+v, want True/%s naming SFCluster open", c, provisioner.ReasonPinned)
		}
		if n := appliedFor(t, inst.UID); n == 0 {
			t.Error("nothing of the accepted instance is on the target cluster")
		}
	})
}

// TestClusterChoiceDenialOfService plays a tenant that pins instances of a
// plan requesting a whole cluster to the cluster meant for another
// tenant (the plan's clusterSelector selects each tenant's own cluster),
// and keeps them with a finalizer of its own: before, they took the
// cluster's capacity (the other tenant's instance found no room) and kept
// its SFCluster from being deleted. Now they are refused, count nowhere,
// and block nothing.
func TestClusterChoiceDenialOfService(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	nsB := fmt.Sprintf("choice-b-%d", envCounter.Add(1))
	e := newEnv(t, envOptions{noCluster: true, moreNamespaces: []string{nsB}, setup: []interoperator.Option{fastClusterChecks}})
	b := e.tenant(nsB)
	for name, ns := range map[string]string{"x": e.ns, "y": nsB} {
		e.registerCluster(t, name, target.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
			c.Labels = map[string]string{"tenant": ns}
			c.Spec.TotalCapacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		})
	}
	e.createService(t, "svc")
	e.choicePlan(t, "2", "tenant={{ .instance.metadata.namespace }}")
	tenantA, tenantB := onboardingTenant(t, e.ns), onboardingTenant(t, nsB)

	const keep = "attacker.example/keep"
	for i := range 3 {
		b.tenantInstance(t, tenantB, fmt.Sprintf("squat-%d", i), "x", func(inst *osbv1alpha1.SFServiceInstance) {
			inst.Finalizers = []string{keep}
		})
	}
	t.Cleanup(func() {
		for i := range 3 {
			inst := &osbv1alpha1.SFServiceInstance{}
			if err := onboarding.Client.Get(context.Background(), client.ObjectKey{Namespace: nsB, Name: fmt.Sprintf("squat-%d", i)}, inst); err == nil {
				controllerutil.RemoveFinalizer(inst, keep)
				_ = onboarding.Client.Update(context.Background(), inst)
				_ = onboarding.Client.Delete(context.Background(), inst)
			}
		}
	})
	for i := range 3 {
		inst := b.waitInstance(t, fmt.Sprintf("squat-%d", i), osbv1alpha1.StateFailed)
		r := readyCondition(inst.Status.Conditions)
		if r == nil || r.Reason != string(provisioner.ReasonClusterNotAllowed) || strings.Contains(r.Message, e.ns) {
			t.Errorf("squat-%d: Ready %+v; want reason %s, without the other tenant's namespace", i, r, provisioner.ReasonClusterNotAllowed)
		}
		if n := appliedFor(t, inst.UID); n != 0 {
			t.Errorf("squat-%d: %d objects on the target cluster; want none", i, n)
		}
	}

	// Tenant A's instance still finds its cluster's capacity.
	e.tenantInstance(t, tenantA, "own", "")
	if inst := e.waitInstance(t, "own", osbv1alpha1.StateSucceeded); inst.Spec.ClusterID != "x" {
		t.Errorf("tenant A's instance went to %q, want x", inst.Spec.ClusterID)
	}
	if c := e.recount(t, "x"); c.Status.ServiceInstanceCount != 1 {
		t.Errorf("SFCluster x counts %d instances, want tenant A's alone: %s", c.Status.ServiceInstanceCount, describeSFCluster(c))
	}

	// Offboarding x waits for tenant A's instance only.
	must(t, platform.Client.Delete(ctx, e.sfcluster(t, "x")))
	e.waitSFCluster(t, "x", "Offboarding=DeletionBlocked naming tenant A's instance alone", func(c *resourcev1alpha1.SFCluster) bool {
		off := condition(c, resourcev1alpha1.SFClusterConditionOffboarding)
		return c.DeletionTimestamp != nil && off != nil && off.Reason == resourcev1alpha1.SFClusterReasonDeletionBlocked &&
			strings.Contains(off.Message, "1 instance") && strings.Contains(off.Message, e.ns+"/own") && !strings.Contains(off.Message, "squat")
	})
	deleteAndWait(t, tenantA, e.instance(t, "own"))
	waitGone(t, platform.Client, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "x"}})
}
