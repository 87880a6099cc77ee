package landscape

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/api/crds"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape/localcluster"
	"github.com/marketplane/marketplane/internal/operator/app"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// registerClusters installs the operator's CRDs on the platform cluster
// (what `marketplane-operator init` does), creates the operator's
// namespace, and registers the onboarding and workload clusters there as
// Shared Clusters with their admin kubeconfig Secrets.
func (l *Landscape) registerClusters(ctx context.Context) error {
	all, err := crds.ForCluster(crds.ClusterPlatform)
	if err != nil {
		return err
	}
	groups := []string{providerv1alpha1.GroupVersion.Group, clustersv1alpha1.GroupVersion.Group}
	var operatorCRDs []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if slices.Contains(groups, crd.Spec.Group) {
			operatorCRDs = append(operatorCRDs, crd)
		}
	}
	if err := crdinstall.Apply(ctx, l.Platform.Client, app.FieldOwner, l.cfg.StartTimeout, operatorCRDs...); err != nil {
		return fmt.Errorf("install the operator's CRDs: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := l.Platform.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", Namespace, err)
	}
	for _, r := range []struct {
		c       *Cluster
		purpose string
	}{
		{l.Onboarding, clustersv1alpha1.PurposeOnboarding},
		{l.Workload, clustersv1alpha1.PurposeWorkload},
	} {
		if err := localcluster.Register(ctx, l.Platform.Client, localcluster.Registration{
			Namespace:  Namespace,
			Name:       r.c.Name,
			Kubeconfig: r.c.Kubeconfig,
			Purposes:   []string{r.purpose},
			Tenancy:    clustersv1alpha1.TenancyShared,
		}); err != nil {
			return fmt.Errorf("register cluster %s: %w", r.c.Name, err)
		}
	}
	return nil
}

// waitClustersReady waits until the operator reports the onboarding and
// workload Clusters Ready and has installed the ManagedControlPlane CRD on
// the onboarding cluster: then tenants can start.
func (l *Landscape) waitClustersReady(ctx context.Context) error {
	mcpCRD := "managedcontrolplanes." + corev2alpha1.GroupVersion.Group
	var pending string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, l.cfg.StartTimeout, true, func(ctx context.Context) (bool, error) {
		if err := l.operator.failed(); err != nil {
			return false, err
		}
		for _, name := range []string{ClusterOnboarding, ClusterWorkload} {
			c := &clustersv1alpha1.Cluster{}
			if err := l.Platform.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, c); err != nil {
				return false, fmt.Errorf("get Cluster %s: %w", name, err)
			}
			if !apimeta.IsStatusConditionTrue(c.Status.Conditions, common.ConditionTypeReady) {
				pending = fmt.Sprintf("Cluster %s/%s is not Ready: %+v", Namespace, name, c.Status.Conditions)
				return false, nil
			}
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := l.Onboarding.Client.Get(ctx, client.ObjectKey{Name: mcpCRD}, crd); err != nil {
			pending = fmt.Sprintf("CRD %s on the onboarding cluster: %v", mcpCRD, err)
			return false, client.IgnoreNotFound(err)
		}
		if crdinstall.Established(crd) {
			return true, nil
		}
		pending = fmt.Sprintf("CRD %s on the onboarding cluster is not established", mcpCRD)
		return false, nil
	})
	if err != nil {
		if pending != "" && ctx.Err() == nil {
			var tails []string
			for i := range OperatorReplicas {
				log := l.Layout.Log(OperatorProcess(i))
				tails = append(tails, fmt.Sprintf("last lines of %s:\n%s", log, supervisor.LogTail(log, 10)))
			}
			return fmt.Errorf("waiting for the operator to report the clusters Ready: not within %s; last seen: %s; %s",
				l.cfg.StartTimeout, pending, strings.Join(tails, "\n"))
		}
		return err
	}
	return nil
}
