// Package controller is the compatibility provider's domain logic, the part
// an openMCP provider author writes: on CreateOrUpdate it installs the
// Greeting CRD (the DomainServiceAPI) into the tenant's control plane with
// one Greeting, and keeps a namespace with a ConfigMap for the tenant on
// the workload cluster; on Delete it removes both again.
package controller

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/openmcp-project/opencontrolplane-runtime/pkg/serviceprovider"
	spclusteraccess "github.com/openmcp-project/opencontrolplane-runtime/pkg/serviceprovider/clusteraccess"

	"github.com/marketplane/marketplane/test/openmcp-compat/api/v1alpha1"
)

// GreetingCRDName is the name of the DomainServiceAPI's CRD.
const GreetingCRDName = "greetings." + "echo.services.open-control-plane.io"

// GreetingName and GreetingNamespace locate the Greeting the provider keeps
// in each control plane.
const (
	GreetingName      = "welcome"
	GreetingNamespace = "default"
)

//go:embed greeting-crd.yaml
var greetingCRD []byte

// installGreetingCRD creates the Greeting CRD, the DomainServiceAPI, in
// the control plane unless it is there; a failure shows on obj.
func installGreetingCRD(ctx context.Context, mcp client.Client, obj *v1alpha1.Echo) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(greetingCRD, crd); err != nil {
		return fmt.Errorf("decode Greeting CRD: %w", err)
	}
	if err := mcp.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		serviceprovider.StatusProgressing(obj, "DomainAPIFailed", "cannot install the Greeting CRD")
		return fmt.Errorf("create Greeting CRD: %w", err)
	}
	return nil
}

// Echo implements serviceprovider.Reconciler for Echo objects.
type Echo struct{}

var _ serviceprovider.Reconciler[*v1alpha1.Echo, *v1alpha1.ProviderConfig] = &Echo{}

// WorkloadNamespace is the namespace on the workload cluster of the Echo
// name in namespace.
func WorkloadNamespace(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "echo-" + hex.EncodeToString(sum[:8])
}

// CreateOrUpdate installs the Greeting CRD and Greeting in the control
// plane and the tenant's namespace on the workload cluster.
func (e *Echo) CreateOrUpdate(ctx context.Context, obj *v1alpha1.Echo, _ *v1alpha1.ProviderConfig, clusters spclusteraccess.ClusterContext) (ctrl.Result, error) {
	mcp := clusters.MCPCluster.Client()
	if err := installGreetingCRD(ctx, mcp, obj); err != nil {
		return ctrl.Result{}, err
	}
	greeting := &unstructured.Unstructured{}
	greeting.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Greeting"))
	greeting.SetName(GreetingName)
	greeting.SetNamespace(GreetingNamespace)
	if _, err := controllerutil.CreateOrUpdate(ctx, mcp, greeting, func() error {
		return unstructured.SetNestedField(greeting.Object, obj.Spec.Message, "spec", "message")
	}); err != nil {
		// The CRD may not be served yet right after it was created.
		serviceprovider.StatusProgressing(obj, "DomainAPIPending", "waiting for the Greeting API in the control plane")
		return ctrl.Result{RequeueAfter: time.Second}, nil //nolint:nilerr // retried; the condition says why.
	}

	workload := clusters.WorkloadCluster.Client()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: WorkloadNamespace(obj.Namespace, obj.Name)}}
	if err := workload.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("create workload namespace: %w", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "greeting", Namespace: ns.Name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, workload, cm, func() error {
		cm.Data = map[string]string{"message": obj.Spec.Message}
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("write workload ConfigMap: %w", err)
	}
	serviceprovider.StatusReady(obj)
	return ctrl.Result{}, nil
}

// Delete removes the Greeting CRD (and with it every Greeting) and the
// workload namespace; it returns once the CRD is gone and the namespace is
// gone or terminating.
func (e *Echo) Delete(ctx context.Context, obj *v1alpha1.Echo, _ *v1alpha1.ProviderConfig, clusters spclusteraccess.ClusterContext) (ctrl.Result, error) {
	serviceprovider.StatusTerminating(obj)
	mcp := clusters.MCPCluster.Client()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: GreetingCRDName}}
	if err := mcp.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete Greeting CRD: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: WorkloadNamespace(obj.Namespace, obj.Name)}}
	if err := clusters.WorkloadCluster.Client().Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete workload namespace: %w", err)
	}
	if err := mcp.Get(ctx, client.ObjectKeyFromObject(crd), crd); err == nil {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("check the Greeting CRD is gone: %w", err)
	}
	if err := clusters.WorkloadCluster.Client().Get(ctx, client.ObjectKeyFromObject(ns), ns); err == nil && ns.DeletionTimestamp.IsZero() {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	} else if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("check the workload namespace is deleted: %w", err)
	}
	return ctrl.Result{}, nil
}
