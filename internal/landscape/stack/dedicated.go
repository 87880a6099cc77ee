package stack

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/internal/landscape"
)

// Names of the dedicated-cluster service's objects on the platform cluster
// (examples/catalog/plan-dedicated-cluster.yaml).
const (
	// DedicatedClustersNamespace holds the ClusterRequests and
	// AccessRequests of the dedicated-cluster plan and the AccessRequests'
	// kubeconfig Secrets.
	DedicatedClustersNamespace = "dedicated-clusters"
	// DedicatedClustersSFCluster is the SFCluster the plan renders onto:
	// the platform cluster through the identity dedicatedIdentity.
	DedicatedClustersSFCluster = "dedicated-clusters"
	// dedicatedIdentity names the ServiceAccount (in the catalog
	// namespace), its token Secret, and the Role and RoleBinding in
	// DedicatedClustersNamespace.
	dedicatedIdentity = "dedicated-clusters"
	// dedicatedSecret is the SFCluster's kubeconfig Secret in the catalog
	// namespace.
	dedicatedSecret = "dedicated-clusters-kubeconfig"
	// MaxDedicatedClusters is the inter-operator's
	// spec.accessPolicy.maxExclusiveClusters on the landscape: how many
	// dedicated clusters (each a kube-apiserver and controller manager on
	// the landscape's machine) may exist at once.
	MaxDedicatedClusters = 3
)

// interoperatorPolicy is the inter-operator's access policy on the
// landscape: its defaults, and room for MaxDedicatedClusters Exclusive
// clusters, which the dedicated-cluster plan requests on its behalf. The
// default is none (each could be a new API server); granting them is the
// platform operator's decision, made here for the landscape.
func interoperatorPolicy() *providerv1alpha1.AccessPolicy {
	p := interoperator.AccessPolicy()
	p.MaxExclusiveClusters = ptr.To[int32](MaxDedicatedClusters)
	return p
}

// ensureDedicatedClusters prepares what the dedicated-cluster plan renders
// through, least privilege (docs/multicluster.md, "Dedicated clusters"):
//
//   - the namespace DedicatedClustersNamespace, labelled and owned as a
//     provider namespace of the inter-operator's ServiceProvider, so that
//     the operator polices every request there with the inter-operator's
//     access policy (no platform cluster, at most maxExclusiveClusters
//     Exclusive clusters, AccessRequests only through the namespace's own
//     ClusterRequests and within the ceiling). Requests in a namespace
//     that is neither a provider's nor an MCP's are not policed at all,
//     so an identity that may write them there could ask for anything;
//   - the ServiceAccount dedicatedIdentity in the catalog namespace, with a
//     Role in DedicatedClustersNamespace only: ClusterRequests and
//     AccessRequests (create, read, apply, delete) and reading Secrets.
//     No cluster-wide rights, no Secrets elsewhere;
//   - its token, from a ServiceAccount token Secret, as a kubeconfig of
//     the platform cluster in the Secret dedicatedSecret, which the
//     SFCluster DedicatedClustersSFCluster names.
//
// ServiceAccount, token and Secret live in the catalog namespace, not in
// DedicatedClustersNamespace: the identity may read every Secret there, and
// should not find its own token among them. It is idempotent: a resumed
// landscape rewrites the kubeconfig for the platform cluster's current
// address.
func ensureDedicatedClusters(ctx context.Context, l *landscape.Landscape, timeout time.Duration) error {
	c := l.Platform.Client
	sp := &providerv1alpha1.ServiceProvider{}
	if err := c.Get(ctx, client.ObjectKey{Name: interoperatorName}, sp); err != nil {
		return fmt.Errorf("get ServiceProvider %s: %w", interoperatorName, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DedicatedClustersNamespace}}
	if err := ensure(ctx, c, ns, func() {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		// The labels and owner by which the operator's policy knows a
		// provider namespace (internal/operator/policy).
		ns.Labels[providerv1alpha1.ManagedByLabel] = "marketplane-operator"
		ns.Labels["openmcp.cloud/provider-kind"] = "ServiceProvider"
		ns.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: providerv1alpha1.GroupVersion.String(), Kind: "ServiceProvider", Name: sp.Name, UID: sp.UID,
		}}
	}); err != nil {
		return err
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: dedicatedIdentity, Namespace: CatalogNamespace}}
	if err := ensure(ctx, c, sa, func() {}); err != nil {
		return err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: dedicatedIdentity, Namespace: DedicatedClustersNamespace}}
	if err := ensure(ctx, c, role, func() {
		role.Rules = []rbacv1.PolicyRule{
			{
				APIGroups: []string{clustersv1alpha1.GroupVersion.Group}, Resources: []string{"clusterrequests", "accessrequests"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
			},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		}
	}); err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: dedicatedIdentity, Namespace: DedicatedClustersNamespace}}
	if err := ensure(ctx, c, binding, func() {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: dedicatedIdentity}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
	}); err != nil {
		return err
	}

	// A token Secret, not a TokenRequest: the SFCluster's kubeconfig must
	// keep working without something on the landscape to refresh it. It
	// dies with the ServiceAccount.
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: dedicatedIdentity + "-token", Namespace: CatalogNamespace}}
	if err := ensure(ctx, c, token, func() {
		token.Type = corev1.SecretTypeServiceAccountToken
		if token.Annotations == nil {
			token.Annotations = map[string]string{}
		}
		token.Annotations[corev1.ServiceAccountNameKey] = sa.Name
	}); err != nil {
		return err
	}
	var last lastError
	if err := waitFor(ctx, timeout, "the token of ServiceAccount "+CatalogNamespace+"/"+sa.Name, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(token), token); err != nil {
			return last.note(err)
		}
		return len(token.Data[corev1.ServiceAccountTokenKey]) > 0, nil
	}, func() string {
		return joinSeen("no token yet (the platform's serviceaccount-token controller writes it)", last.String())
	}); err != nil {
		return err
	}
	kubeconfig, err := tokenKubeconfig(l.Platform.Kubeconfig, string(token.Data[corev1.ServiceAccountTokenKey]))
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: dedicatedSecret, Namespace: CatalogNamespace}}
	return ensure(ctx, c, secret, func() { secret.Data = map[string][]byte{"kubeconfig": kubeconfig} })
}

// tokenKubeconfig returns admin, an admin kubeconfig, with its current
// context's credentials replaced by token: the same server and CA, another
// identity.
func tokenKubeconfig(admin []byte, token string) ([]byte, error) {
	cfg, err := clientcmd.Load(admin)
	if err != nil {
		return nil, fmt.Errorf("read the platform cluster's kubeconfig: %w", err)
	}
	current, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("the platform cluster's kubeconfig has no context %q", cfg.CurrentContext)
	}
	cluster, ok := cfg.Clusters[current.Cluster]
	if !ok {
		return nil, fmt.Errorf("the platform cluster's kubeconfig has no cluster %q", current.Cluster)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[DedicatedClustersSFCluster] = cluster
	out.AuthInfos[dedicatedIdentity] = &clientcmdapi.AuthInfo{Token: token}
	out.Contexts[DedicatedClustersSFCluster] = &clientcmdapi.Context{Cluster: DedicatedClustersSFCluster, AuthInfo: dedicatedIdentity}
	out.CurrentContext = DedicatedClustersSFCluster
	raw, err := clientcmd.Write(*out)
	if err != nil {
		return nil, fmt.Errorf("write the dedicated-clusters kubeconfig: %w", err)
	}
	return raw, nil
}
