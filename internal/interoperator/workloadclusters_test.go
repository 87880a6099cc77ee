package interoperator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
)

// TestOpenMCPWorkloadClusters registers the openMCP Clusters of purpose
// workload that the ProviderConfig selects as SFClusters, with access
// through an AccessRequest, and offboards the SFCluster when its Cluster
// goes. The provider operator is not run here: the test grants the
// AccessRequest as the operator's AccessRequest controller does (a Secret
// "<name>.kubeconfig" next to the request, status.phase Granted and
// status.secretRef), with the kubeconfig of a real workload API server.
func TestOpenMCPWorkloadClusters(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	workload := sharedWorkloads(t)["w3"]
	clustersNS := fmt.Sprintf("clusters-%d", envCounter.Load()+100)
	must(t, platform.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clustersNS}}))
	e := newEnv(t, envOptions{noCluster: true, configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.WorkloadClusters = &interoperatorv1alpha1.WorkloadClusters{Namespace: clustersNS,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}},
			Permissions: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps", "secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			}}
	}, setup: []interoperator.Option{interoperator.WithClusterChecks(2*time.Second, 200*time.Millisecond, 2*time.Second)}})

	newCluster := func(name string, purpose string, labels map[string]string) *clustersv1alpha1.Cluster {
		c := &clustersv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: clustersNS, Name: name, Labels: labels},
			Spec:       clustersv1alpha1.ClusterSpec{Profile: "local", Purposes: []string{purpose}, Tenancy: clustersv1alpha1.TenancyShared},
		}
		must(t, platform.Client.Create(ctx, c))
		return c
	}
	gold := map[string]string{"tier": "gold"}
	wl := newCluster("wl-1", clustersv1alpha1.PurposeWorkload, gold)
	newCluster("mcp-1", clustersv1alpha1.PurposeMCP, gold)
	newCluster("wl-other", clustersv1alpha1.PurposeWorkload, nil)

	// The AccessRequest for the selected workload Cluster.
	ar := &clustersv1alpha1.AccessRequest{}
	arKey := client.ObjectKey{Namespace: e.catalog, Name: "wl-1"}
	waitFor(t, "the AccessRequest for Cluster wl-1", func() bool { return platform.Client.Get(ctx, arKey, ar) == nil })
	if ref := ar.Spec.ClusterRef; ref == nil || *ref != (common.ObjectReference{Namespace: clustersNS, Name: "wl-1"}) || ar.Spec.Token == nil || len(ar.Spec.Token.Permissions) != 1 {
		t.Fatalf("AccessRequest spec = %+v, want clusterRef %s/wl-1 and token permissions", ar.Spec, clustersNS)
	}
	if rules := ar.Spec.Token.Permissions[0].Rules; len(rules) != 1 || rules[0].APIGroups[0] != "" || rules[0].Resources[0] != "namespaces" {
		t.Errorf("AccessRequest asks for %+v, want exactly the ProviderConfig's permissions", rules)
	}
	if sfc := (&resourcev1alpha1.SFCluster{}); !apierrors.IsNotFound(platform.Client.Get(ctx, arKey, sfc)) {
		t.Fatal("the SFCluster exists before its AccessRequest was granted")
	}

	// Grant it, as the operator's AccessRequest controller does.
	must(t, platform.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "wl-1.kubeconfig"},
		Data:       map[string][]byte{clustersv1alpha1.SecretKeyKubeconfig: workload.Kubeconfig},
	}))
	ar.Status.Phase = clustersv1alpha1.RequestGranted
	ar.Status.SecretRef = &common.ObjectReference{Namespace: e.catalog, Name: "wl-1.kubeconfig"}
	must(t, platform.Client.Status().Update(ctx, ar))

	sfc := &resourcev1alpha1.SFCluster{}
	waitFor(t, "the SFCluster wl-1 to be registered and Ready", func() bool {
		return platform.Client.Get(ctx, arKey, sfc) == nil &&
			apimeta.IsStatusConditionTrue(sfc.Status.Conditions, resourcev1alpha1.SFClusterConditionReady)
	})
	if sfc.Spec.SecretRef != "wl-1.kubeconfig" || sfc.Labels[clusters.LabelWorkloadClusterName] != "wl-1" {
		t.Errorf("SFCluster = %+v, want secretRef wl-1.kubeconfig and the Cluster's labels", sfc.Labels)
	}

	// An instance is placed there and provisions on the workload cluster.
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision,
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: placed\n")})
	e.createInstance(t, "on-openmcp", "svc", "plan", nil)
	if inst := e.waitInstance(t, "on-openmcp", osbv1alpha1.StateSucceeded); inst.Spec.ClusterID != "wl-1" {
		t.Errorf("instance placed on %q, want wl-1", inst.Spec.ClusterID)
	}
	must(t, workload.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "placed"}, &corev1.ConfigMap{}))

	// The Cluster goes: the SFCluster is offboarded, which waits for the
	// instance; the access stays until the SFCluster is gone.
	deleteAndWait(t, platform.Client, wl)
	waitFor(t, "the SFCluster's deletion to wait for the instance", func() bool {
		must(t, platform.Client.Get(ctx, arKey, sfc))
		c := apimeta.FindStatusCondition(sfc.Status.Conditions, resourcev1alpha1.SFClusterConditionOffboarding)
		return sfc.DeletionTimestamp != nil && c != nil && c.Reason == resourcev1alpha1.SFClusterReasonDeletionBlocked
	})
	must(t, platform.Client.Get(ctx, arKey, &clustersv1alpha1.AccessRequest{}))
	deleteAndWait(t, onboarding.Client, e.instance(t, "on-openmcp"))
	waitGone(t, platform.Client, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "wl-1"}})
	waitGone(t, platform.Client, &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "wl-1"}})

	// Clusters of another purpose, or outside the selector, were never
	// registered.
	for _, name := range []string{"mcp-1", "wl-other"} {
		if err := platform.Client.Get(ctx, client.ObjectKey{Namespace: e.catalog, Name: name}, &clustersv1alpha1.AccessRequest{}); !apierrors.IsNotFound(err) {
			t.Errorf("AccessRequest for Cluster %s: %v, want none", name, err)
		}
	}
}
