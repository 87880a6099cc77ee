package providertest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	controlplanev2alpha1 "github.com/marketplane/marketplane/api/controlplane/v2alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// AdminTokenName is the token (spec.iam.tokens) every MCP of CreateMCP
// has: a ServiceAccount bound to cluster-admin, the tenant's own access.
const AdminTokenName = "admin"

// MCP is a Ready ManagedControlPlane or ControlPlane and access to its
// cluster.
type MCP struct {
	// Name and Namespace are the ManagedControlPlane's, on the onboarding
	// cluster; service objects for it carry the same.
	Name, Namespace string
	// ClusterName is the name of the Cluster it was granted (e.g. "mcp-0").
	ClusterName string
	// Config and Client reach the MCP cluster with the tenant's admin
	// token, from the kubeconfig the ManagedControlPlane published in
	// status.access (the path a tenant takes). The client's scheme is
	// the one of testenv (built-in kinds, apiextensions, Marketplane).
	Config *rest.Config
	Client client.Client
	// Admin is the MCP cluster's API server itself. On a landscape
	// WithKCP it is the workspace with the admin kubeconfig the kcp
	// ClusterProvider wrote for its Cluster (cluster-admin in the
	// workspace only); there is no process to stop.
	Admin *testenv.Cluster
}

// controlPlane is a control plane of either kind: ManagedControlPlane or
// ControlPlane.
type controlPlane interface {
	client.Object
	ControlPlaneSpec() *corev2alpha1.ManagedControlPlaneSpec
	ControlPlaneStatus() *corev2alpha1.ManagedControlPlaneStatus
}

// CreateMCP creates the ManagedControlPlane name in namespace on the
// onboarding cluster (creating the namespace when missing), waits until it
// is Ready and returns access to its cluster. The MCP is deleted when the
// test ends and waited for, so that its cluster is free again; service
// objects named like it are deleted with it, which needs their provider
// still running: create the MCP after starting the provider, or delete it
// with DeleteMCP before the provider stops.
func (l *Landscape) CreateMCP(t testing.TB, name, namespace string) *MCP {
	t.Helper()
	return l.createControlPlane(t, &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}})
}

// CreateControlPlane is CreateMCP for openMCP's current kind: it creates the
// core.open-control-plane.io ControlPlane name in namespace, waits until it
// is Ready and returns access to its cluster. The same controller serves
// both kinds, so a provider sees no difference. The ControlPlane is deleted
// when the test ends (or with DeleteControlPlane), like CreateMCP's.
func (l *Landscape) CreateControlPlane(t testing.TB, name, namespace string) *MCP {
	t.Helper()
	return l.createControlPlane(t, &controlplanev2alpha1.ControlPlane{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}})
}

// kindOf names the kind of m for messages.
func kindOf(m controlPlane) string {
	if _, ok := m.(*controlplanev2alpha1.ControlPlane); ok {
		return "ControlPlane"
	}
	return "ManagedControlPlane"
}

// createControlPlane creates m (named, with an empty spec) with the admin
// token, waits until it is Ready and returns access to its cluster.
func (l *Landscape) createControlPlane(t testing.TB, m controlPlane) *MCP {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.timeout)
	defer cancel()
	name, namespace, kind := m.GetName(), m.GetNamespace(), kindOf(m)
	oc := l.Onboarding.Client
	if err := oc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("providertest: create namespace %s on the onboarding cluster: %v", namespace, err)
	}
	*m.ControlPlaneSpec() = corev2alpha1.ManagedControlPlaneSpec{IAM: corev2alpha1.IAMConfig{Tokens: []corev2alpha1.TokenConfig{{
		Name:        AdminTokenName,
		TokenConfig: clustersv1alpha1.TokenConfig{RoleRefs: []common.RoleRef{{Name: "cluster-admin", Kind: common.RoleKindClusterRole}}},
	}}}}
	if err := oc.Create(ctx, m); err != nil {
		t.Fatalf("providertest: create %s %s/%s: %v", kind, namespace, name, err)
	}
	empty := copyOf(m)
	t.Cleanup(func() {
		if err := l.deleteControlPlane(copyOf(empty)); err != nil {
			t.Errorf("providertest: clean up: %v", err)
		}
	})

	key := client.ObjectKeyFromObject(m)
	err := poll(ctx, func(ctx context.Context) error {
		if err := oc.Get(ctx, key, m); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(m.ControlPlaneStatus().Conditions, common.ConditionTypeReady) {
			return fmt.Errorf("%s %s is not Ready: %s", kind, key, conditionsText(m.ControlPlaneStatus().Conditions))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("providertest: %v", err)
	}

	ref, ok := m.ControlPlaneStatus().Access[AdminTokenName]
	if !ok {
		t.Fatalf("providertest: %s %s is Ready but publishes no %q access", kind, key, AdminTokenName)
	}
	secret := &corev1.Secret{}
	if err := oc.Get(ctx, ref.NamespacedName(namespace), secret); err != nil {
		t.Fatalf("providertest: kubeconfig Secret of %s %s: %v", kind, key, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		t.Fatalf("providertest: kubeconfig of %s %s cannot be read", kind, key)
	}
	c, err := client.New(cfg, client.Options{Scheme: l.Platform.Scheme})
	if err != nil {
		t.Fatalf("providertest: client for %s %s: %v", kind, key, err)
	}

	cr := &clustersv1alpha1.ClusterRequest{}
	crKey := client.ObjectKey{Namespace: corev2alpha1.PlatformNamespace(m), Name: name}
	if err := l.Platform.Client.Get(ctx, crKey, cr); err != nil || cr.Status.Cluster == nil {
		t.Fatalf("providertest: ClusterRequest %s of %s %s: %v (status.cluster %v)", crKey, kind, key, err, cr.Status.Cluster)
	}
	admin := l.Cluster(cr.Status.Cluster.Name)
	if admin == nil && l.KCP != nil {
		if admin, err = l.workspaceAdmin(ctx, cr.Status.Cluster.NamespacedName()); err != nil {
			t.Fatalf("providertest: %s %s: %v", kind, key, err)
		}
	}
	return &MCP{
		Name:        name,
		Namespace:   namespace,
		ClusterName: cr.Status.Cluster.Name,
		Config:      cfg,
		Client:      c,
		Admin:       admin,
	}
}

// workspaceAdmin returns admin access to the kcp workspace of the Cluster
// key, from the kubeconfig Secret its ClusterProvider wrote.
func (l *Landscape) workspaceAdmin(ctx context.Context, key client.ObjectKey) (*testenv.Cluster, error) {
	cl := &clustersv1alpha1.Cluster{}
	if err := l.Platform.Client.Get(ctx, key, cl); err != nil {
		return nil, fmt.Errorf("get Cluster %s: %w", key, err)
	}
	cfg, err := clusters.AdminConfig(ctx, l.Platform.Client, cl)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig of Cluster %s: %w", key, err)
	}
	secret := &corev1.Secret{}
	if err := l.Platform.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: cl.Annotations[clusters.KubeconfigSecretAnnotation]}, secret); err != nil {
		return nil, fmt.Errorf("kubeconfig Secret of Cluster %s: %w", key, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: l.Platform.Scheme})
	if err != nil {
		return nil, fmt.Errorf("client for Cluster %s: %w", key, err)
	}
	return &testenv.Cluster{Name: key.Name, Config: cfg, Client: c, Scheme: l.Platform.Scheme,
		Kubeconfig: secret.Data[clusters.KubeconfigSecretKey]}, nil
}

// copyOf returns a copy of m with only its name and namespace.
func copyOf(m controlPlane) controlPlane {
	var out controlPlane = &corev2alpha1.ManagedControlPlane{}
	if _, ok := m.(*controlplanev2alpha1.ControlPlane); ok {
		out = &controlplanev2alpha1.ControlPlane{}
	}
	out.SetName(m.GetName())
	out.SetNamespace(m.GetNamespace())
	return out
}

// DeleteMCP deletes the ManagedControlPlane name in namespace and waits
// until it is gone.
func (l *Landscape) DeleteMCP(t testing.TB, name, namespace string) {
	t.Helper()
	if err := l.deleteMCP(name, namespace); err != nil {
		t.Fatalf("providertest: %v", err)
	}
}

// DeleteControlPlane deletes the ControlPlane name in namespace and waits
// until it is gone.
func (l *Landscape) DeleteControlPlane(t testing.TB, name, namespace string) {
	t.Helper()
	if err := l.deleteControlPlane(&controlplanev2alpha1.ControlPlane{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}); err != nil {
		t.Fatalf("providertest: %v", err)
	}
}

func (l *Landscape) deleteMCP(name, namespace string) error {
	return l.deleteControlPlane(&corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}})
}

// deleteControlPlane deletes m (which names it) and waits until it is gone.
func (l *Landscape) deleteControlPlane(m controlPlane) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.timeout)
	defer cancel()
	kind, namespace, name := kindOf(m), m.GetNamespace(), m.GetName()
	if err := l.Onboarding.Client.Delete(ctx, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("delete %s %s/%s: %w", kind, namespace, name, err)
	}
	return poll(ctx, func(ctx context.Context) error {
		err := l.Onboarding.Client.Get(ctx, client.ObjectKeyFromObject(m), m)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("%s %s/%s is still being deleted: %s", kind, namespace, name, conditionsText(m.ControlPlaneStatus().Conditions))
	})
}

// conditionsText renders conditions for messages: "Type=Status Reason:
// Message; ...".
func conditionsText(conditions []metav1.Condition) string {
	if len(conditions) == 0 {
		return "no conditions"
	}
	parts := make([]string, 0, len(conditions))
	for _, c := range conditions {
		parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// conditionText renders the condition typ, or nothing when it is missing.
func conditionText(conditions []metav1.Condition, typ string) string {
	c := apimeta.FindStatusCondition(conditions, typ)
	if c == nil {
		return ""
	}
	return fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
}
