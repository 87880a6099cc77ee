package controller

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/providerapp"
	"github.com/marketplane/marketplane/pkg/spruntime"

	"github.com/marketplane/marketplane/providers/sample/api/crds"
	apiv1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
)

// Name is the provider's name: the binary and its field owner.
const Name = "sample"

// SampleKind is the ServiceProviderAPI kind, registered in the
// ServiceProvider's status.resources by init, so that deleting a
// ManagedControlPlane deletes the Sample of the same name first.
var SampleKind = apiv1alpha1.GroupVersion.WithKind("Sample")

// MCPPermissions is everything the provider may do in a tenant's MCP
// cluster, and no more: create the DomainServiceAPI's CRD (Kubernetes
// cannot restrict create to a name), read, update and delete that one CRD,
// and list the tenant's objects of it to see whether deletion must wait.
// Change it with the domain logic; a test runs the logic with exactly these
// rights.
func MCPPermissions() clusteraccess.Permissions {
	return clusteraccess.Permissions{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"create"}},
		{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{DomainCRDName}, Verbs: []string{"get", "update", "patch", "delete"}},
		{APIGroups: []string{DomainGroup}, Resources: []string{DomainPlural}, Verbs: []string{"list"}},
	}}
}

// WorkloadPermissions is what the provider may do in the shared workload
// cluster: manage namespaces, one per Sample, and, in ServerNamespace
// only, the servers' Deployments (ProviderConfig spec.workload) and their
// copies of the image pull secrets (spec.imagePullSecrets). They
// are requested whether or not spec.workload is set, since the
// ProviderConfig can change while the provider runs.
func WorkloadPermissions() clusteraccess.Permissions {
	return clusteraccess.Permissions{
		Rules: []rbacv1.PolicyRule{
			// No update or patch: the namespace is created with its labels,
			// and relabelling namespaces on a shared cluster is outside the
			// default access policy (docs/security.md).
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "delete"}},
		},
		// A Role, not a ClusterRole: Deployments of others on the shared
		// cluster are not the provider's business. The operator creates
		// the namespace with the Role. No list or watch: the provider
		// reads its Deployments by name.
		Roles: []clustersv1alpha1.PermissionsRequest{{
			Namespace: ServerNamespace,
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "create", "update", "delete"}},
				// The servers' copies of the image pull secrets
				// (ProviderConfig spec.imagePullSecrets); list finds
				// the copies of names no longer wanted.
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
			},
		}},
	}
}

// AccessOptions configure the provider's cluster access: its permissions in
// MCP clusters and a workload cluster. main hands them to providerapp, the
// tests to clusteraccess.New.
func AccessOptions() []clusteraccess.Option {
	return []clusteraccess.Option{
		clusteraccess.WithMCPPermissions(MCPPermissions()),
		clusteraccess.WithWorkloadCluster(WorkloadPermissions()),
	}
}

// NewScheme returns the scheme of the provider's clients: the Kubernetes
// and Marketplane types and this provider's API.
func NewScheme() (*runtime.Scheme, error) {
	s, err := install.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := apiv1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("register the %s API: %w", Name, err)
	}
	return s, nil
}

// Setup registers the Sample controller with mgr, a manager on the
// onboarding cluster: the runtime's APIReconciler around Reconciler, with
// cluster access through env.Access and the ProviderConfig named like the
// provider on env.Platform. It watches ManagedControlPlanes, so that a
// Sample created before its ManagedControlPlane proceeds when that
// appears. opts come after the defaults; main passes none, tests shorten
// intervals.
func Setup(_ context.Context, mgr ctrl.Manager, env providerapp.Env, opts ...spruntime.Option) error {
	r, err := spruntime.NewAPIReconciler(env.Flags.ProviderName,
		func() *apiv1alpha1.Sample { return &apiv1alpha1.Sample{} },
		func() *apiv1alpha1.ProviderConfig { return &apiv1alpha1.ProviderConfig{} },
		NewReconciler(env.Flags.ProviderName, env.Platform.GetAPIReader(), env.Pod.Namespace),
		clusteraccess.For[*apiv1alpha1.Sample](env.Access),
		env.Platform,
		append([]spruntime.Option{
			spruntime.WithEnvironment(env.Flags.Environment),
			spruntime.WithManagedControlPlaneWatch(),
		}, opts...)...)
	if err != nil {
		return err
	}
	return r.SetupWithManager(mgr)
}

// Provider describes the provider binary: its CRDs for init, its service
// kind, and Setup for run.
func Provider() (providerapp.Provider, error) {
	scheme, err := NewScheme()
	if err != nil {
		return providerapp.Provider{}, err
	}
	list, err := crds.CRDs()
	if err != nil {
		return providerapp.Provider{}, err
	}
	return providerapp.Provider{
		Name:         Name,
		Scheme:       scheme,
		CRDs:         list,
		ServiceKinds: []schema.GroupVersionKind{SampleKind},
		Setup: func(ctx context.Context, mgr ctrl.Manager, env providerapp.Env) error {
			return Setup(ctx, mgr, env)
		},
	}, nil
}
