package stack

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/marketplane/marketplane/pkg/manifests"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	catalogfiles "github.com/marketplane/marketplane/examples/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/landscape"
)

// Names of the inter-operator's objects in the landscape.
const (
	interoperatorName = "interoperator"
	// CatalogNamespace is where the catalog, the SFCluster and its
	// kubeconfig Secret live on the platform cluster.
	CatalogNamespace = "interoperator"
	chartConfigMap   = "namespace-quota-chart"
	workloadSecret   = "workload-kubeconfig"
)

// interoperatorProvider is the inter-operator deployed as a ServiceProvider.
func interoperatorProvider(cfg *unstructured.Unstructured) provider {
	return provider{
		name:      interoperatorName,
		binary:    "marketplane-interoperator",
		config:    cfg,
		configCRD: "providerconfigs.interoperator.services.openmcp.cloud",
		policy:    interoperatorPolicy(),
	}
}

// startInteroperator grants the inter-operator read access to its catalog
// namespace, starts it as a ServiceProvider, registers the workload cluster
// and the dedicated-clusters namespace of the platform cluster as its
// SFClusters and loads the sample catalog.
func startInteroperator(ctx context.Context, l *landscape.Landscape, timeout time.Duration) error {
	c := l.Platform.Client
	objs, err := catalogObjects()
	if err != nil {
		return err
	}
	var providerConfig *unstructured.Unstructured
	var rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ProviderConfig" {
			providerConfig = o
			continue
		}
		rest = append(rest, o)
	}
	if err := ensure(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CatalogNamespace}}, func() {}); err != nil {
		return err
	}
	if err := grantCatalogAccess(ctx, c); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: workloadSecret, Namespace: CatalogNamespace}}
	if err := ensure(ctx, c, secret, func() { secret.Data = map[string][]byte{"kubeconfig": l.Workload.Kubeconfig} }); err != nil {
		return err
	}
	chart, err := chartConfigMapFromEmbedded()
	if err != nil {
		return err
	}
	if err := ensure(ctx, c, chart.DeepCopy(), func() {}); err != nil {
		return err
	}
	// The inter-operator's init installs the SF CRDs; the catalog follows.
	if err := interoperatorProvider(providerConfig).start(ctx, l, timeout); err != nil {
		return err
	}
	// Before the catalog: the SFCluster of the dedicated-cluster plan
	// names the kubeconfig Secret this writes.
	if err := ensureDedicatedClusters(ctx, l, timeout); err != nil {
		return fmt.Errorf("dedicated clusters: %w", err)
	}
	for _, o := range rest {
		o := o.DeepCopy()
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	plans := &osbv1alpha1.SFPlanList{}
	var last lastError
	return waitFor(ctx, timeout, "the sample catalog's plans Ready", func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, plans, client.InNamespace(CatalogNamespace)); err != nil {
			return last.note(err)
		}
		for _, p := range plans.Items {
			if !apimeta.IsStatusConditionTrue(p.Status.Conditions, "Ready") {
				return false, nil
			}
		}
		return len(plans.Items) > 0, nil
	}, func() string {
		var parts []string
		if len(plans.Items) == 0 {
			parts = append(parts, "no SFPlans in namespace "+CatalogNamespace)
		}
		for _, p := range plans.Items {
			if !apimeta.IsStatusConditionTrue(p.Status.Conditions, "Ready") {
				parts = append(parts, "SFPlan "+p.Name+" "+describeConditions(p.Status.Conditions))
			}
		}
		parts = append(parts, last.String())
		return joinSeen(parts...) + newProviderWatch(l, "ServiceProvider", interoperatorName).runLogTails()
	})
}

// catalogObjects decodes the embedded catalog YAML files.
func catalogObjects() ([]*unstructured.Unstructured, error) {
	entries, err := fs.ReadDir(catalogfiles.Files, ".")
	if err != nil {
		return nil, fmt.Errorf("read the embedded catalog: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		raw, err := catalogfiles.Files.ReadFile(e.Name())
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", e.Name(), err)
		}
		objs, err := manifests.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", e.Name(), err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// chartConfigMapFromEmbedded packages the embedded chart into the ConfigMap
// the Helm plan reads.
func chartConfigMapFromEmbedded() (*corev1.ConfigMap, error) {
	dir, err := os.MkdirTemp("", "marketplane-chart-")
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	defer os.RemoveAll(dir)
	sub, err := fs.Sub(catalogfiles.Files, "charts")
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	if err := os.CopyFS(dir, sub); err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	return catalog.ChartConfigMap(filepath.Join(dir, "namespace-quota"), CatalogNamespace, chartConfigMap)
}

// grantCatalogAccess gives the inter-operator's run service account what
// the operator's least-privilege role does not: reading the catalog and
// its ProviderConfig, writing catalog status and finalizers, keeping the SFClusters
// (status, offboarding finalizer, round-robin position), and reading
// Secrets and ConfigMaps in the catalog namespace only. This is the
// documented way to grant a provider more (docs/operator.md); the verbs are
// those the inter-operator's requests need (test/install compares the
// chart's same rules with an audit log): its caches list and watch, it
// patches, and it reads Secrets and ConfigMaps one by one.
func grantCatalogAccess(ctx context.Context, c client.Client) error {
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "sp-" + interoperatorName, Namespace: "sp-" + interoperatorName}
	name := "marketplane:interoperator-catalog"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := ensure(ctx, c, role, func() {
		role.Rules = []rbacv1.PolicyRule{
			// patch: the catalog's finalizer (deregistration waits for
			// the instances, docs/interoperator.md).
			{APIGroups: []string{osbv1alpha1.GroupVersion.Group}, Resources: []string{"sfservices", "sfplans"}, Verbs: []string{"list", "watch", "patch"}},
			{APIGroups: []string{osbv1alpha1.GroupVersion.Group}, Resources: []string{"sfservices/status", "sfplans/status"}, Verbs: []string{"patch"}},
			// The SFCluster status, the offboarding finalizer and the
			// round-robin position (docs/multicluster.md).
			{APIGroups: []string{"resource.servicefabrik.io"}, Resources: []string{"sfclusters"}, Verbs: []string{"list", "watch", "patch"}},
			{APIGroups: []string{"resource.servicefabrik.io"}, Resources: []string{"sfclusters/status"}, Verbs: []string{"patch"}},
			{APIGroups: []string{"interoperator.services.openmcp.cloud"}, Resources: []string{"providerconfigs"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		}
	}); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := ensure(ctx, c, binding, func() {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
		binding.Subjects = []rbacv1.Subject{sa}
	}); err != nil {
		return err
	}
	nsRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: CatalogNamespace}}
	if err := ensure(ctx, c, nsRole, func() {
		nsRole.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}}}
	}); err != nil {
		return err
	}
	nsBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: CatalogNamespace}}
	return ensure(ctx, c, nsBinding, func() {
		nsBinding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
		nsBinding.Subjects = []rbacv1.Subject{sa}
	})
}
