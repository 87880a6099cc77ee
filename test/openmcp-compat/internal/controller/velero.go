package controller

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openmcp-project/opencontrolplane-runtime/pkg/serviceprovider"
	spclusteraccess "github.com/openmcp-project/opencontrolplane-runtime/pkg/serviceprovider/clusteraccess"

	"github.com/marketplane/marketplane/test/openmcp-compat/api/v1alpha1"
)

// Where the Velero-shaped Echo keeps its server's identity: in a namespace
// of its own in each control plane, bound to cluster-admin there, and in
// the tenant's namespace on the workload cluster.
const (
	ServerNamespace = "echo"
	ServerName      = "echo-server"
	// ServerTokenSecret holds, on the workload cluster, a token of the
	// server's ServiceAccount in the control plane.
	ServerTokenSecret = "echo-server-mcp-token"
	// GreetingSecret holds the Echo's message on the workload cluster.
	GreetingSecret = "greeting"
)

// EchoAsVelero reconciles Echo objects the way openMCP's Velero provider
// (b26ea3d) reconciles Velero objects, within exactly the rules Velero asks
// for: in the control plane it installs its CRD and gives its server a
// ServiceAccount in a namespace of its own, bound to cluster-admin, and a
// token of it; on the workload cluster it keeps the tenant's namespace with
// that token, the server's ServiceAccount and a Secret (Velero's rules there
// hold Secrets, not ConfigMaps). It runs no server: the Echo is Ready once
// every object is in place.
type EchoAsVelero struct{}

var _ serviceprovider.Reconciler[*v1alpha1.Echo, *v1alpha1.ProviderConfig] = &EchoAsVelero{}

// CreateOrUpdate puts the objects in place on both clusters.
func (e *EchoAsVelero) CreateOrUpdate(ctx context.Context, obj *v1alpha1.Echo, _ *v1alpha1.ProviderConfig, clusters spclusteraccess.ClusterContext) (ctrl.Result, error) {
	mcp := clusters.MCPCluster.Client()
	if err := installGreetingCRD(ctx, mcp, obj); err != nil {
		return ctrl.Result{}, err
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ServerNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServerName, Namespace: ServerNamespace}},
	} {
		if err := mcp.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("create %T %s in the control plane: %w", o, o.GetName(), err)
		}
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ServerName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, mcp, crb, func() error {
		crb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}
		crb.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServerName, Namespace: ServerNamespace}}
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("bind the server to cluster-admin in the control plane: %w", err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServerName, Namespace: ServerNamespace}}
	if err := mcp.SubResource("token").Create(ctx, sa, tr); err != nil {
		return ctrl.Result{}, fmt.Errorf("request a token of the server in the control plane: %w", err)
	}

	workload := clusters.WorkloadCluster.Client()
	ns := WorkloadNamespace(obj.Namespace, obj.Name)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServerName, Namespace: ns}},
	} {
		if err := workload.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("create %T %s on the workload cluster: %w", o, o.GetName(), err)
		}
	}
	secrets := map[string]map[string][]byte{
		GreetingSecret:    {"message": []byte(obj.Spec.Message)},
		ServerTokenSecret: {"token": []byte(tr.Status.Token)},
	}
	for name, data := range secrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if _, err := controllerutil.CreateOrUpdate(ctx, workload, s, func() error {
			s.Data = data
			return nil
		}); err != nil {
			return ctrl.Result{}, fmt.Errorf("write Secret %s on the workload cluster: %w", name, err)
		}
	}
	serviceprovider.StatusReady(obj)
	// Like Velero, renew the token long before it expires.
	return ctrl.Result{RequeueAfter: 30 * time.Minute}, nil
}

// Delete removes what CreateOrUpdate made and returns once the CRD and the
// server's namespace in the control plane are gone and the workload
// namespace is gone or terminating. (Velero keeps its CRDs and namespace;
// this provider removes them, so that the validation flow's
// domain-service-gone check holds.)
func (e *EchoAsVelero) Delete(ctx context.Context, obj *v1alpha1.Echo, _ *v1alpha1.ProviderConfig, clusters spclusteraccess.ClusterContext) (ctrl.Result, error) {
	serviceprovider.StatusTerminating(obj)
	mcp, workload := clusters.MCPCluster.Client(), clusters.WorkloadCluster.Client()
	gone := true
	for _, d := range []struct {
		c client.Client
		o client.Object
		// terminating is enough, as for Echo's workload namespace.
		terminating bool
	}{
		{workload, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: WorkloadNamespace(obj.Namespace, obj.Name)}}, true},
		{mcp, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ServerName}}, false},
		{mcp, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ServerNamespace}}, true},
		{mcp, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: GreetingCRDName}}, false},
	} {
		if err := d.c.Delete(ctx, d.o); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete %T %s: %w", d.o, d.o.GetName(), err)
		}
		err := d.c.Get(ctx, client.ObjectKeyFromObject(d.o), d.o)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("check %T %s is gone: %w", d.o, d.o.GetName(), err)
		case d.terminating && d.o.GetDeletionTimestamp() != nil:
		default:
			gone = false
		}
	}
	if !gone {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, nil
}
