// Command brokenprovider is a service provider that misbehaves on purpose,
// for the tests of the validation flow. It serves the sample provider's
// API (kind Sample, its ProviderConfig) under its own provider name, and
// the environment variable BROKEN_MODE says how it fails:
//
//	never-ready  a Sample stays Ready=False (reason NeverReady) for good
//	leave-crd    a Sample gets the CRD brokenobjects.domain.sample.services.openmcp.cloud
//	             in its MCP cluster and is Ready, but deleting it leaves
//	             the CRD behind
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/providerapp"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/providers/sample/api/crds"
	samplev1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
)

// The modes of BROKEN_MODE.
const (
	modeNeverReady = "never-ready"
	modeLeaveCRD   = "leave-crd"
)

// leftCRD is the CRD mode leave-crd installs and never removes.
const leftCRD = "brokenobjects.domain.sample.services.openmcp.cloud"

func main() {
	mode := os.Getenv("BROKEN_MODE")
	if mode != modeNeverReady && mode != modeLeaveCRD {
		fmt.Fprintf(os.Stderr, "BROKEN_MODE is %q, want %s or %s\n", mode, modeNeverReady, modeLeaveCRD)
		os.Exit(64)
	}
	scheme, err := install.NewScheme()
	if err == nil {
		err = samplev1alpha1.AddToScheme(scheme)
	}
	list, cerr := crds.CRDs()
	if err != nil || cerr != nil {
		fmt.Fprintln(os.Stderr, err, cerr)
		os.Exit(1)
	}
	p := providerapp.Provider{
		Name:         "brokenprovider",
		Scheme:       scheme,
		CRDs:         list,
		ServiceKinds: []schema.GroupVersionKind{samplev1alpha1.GroupVersion.WithKind("Sample")},
		Setup: func(_ context.Context, mgr ctrl.Manager, env providerapp.Env) error {
			r, err := spruntime.NewAPIReconciler(env.Flags.ProviderName,
				func() *samplev1alpha1.Sample { return &samplev1alpha1.Sample{} },
				func() *samplev1alpha1.ProviderConfig { return &samplev1alpha1.ProviderConfig{} },
				&reconciler{mode: mode},
				clusteraccess.For[*samplev1alpha1.Sample](env.Access),
				env.Platform,
				spruntime.WithEnvironment(env.Flags.Environment))
			if err != nil {
				return err
			}
			return r.SetupWithManager(mgr)
		},
	}
	os.Exit(p.Main(clusteraccess.WithMCPPermissions(clusteraccess.Permissions{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"create", "get"}},
	}})))
}

// reconciler misbehaves as its mode says.
type reconciler struct{ mode string }

// CreateOrUpdate never gets the object Ready (never-ready), or installs
// leftCRD and reports Ready (leave-crd).
func (r *reconciler) CreateOrUpdate(ctx context.Context, obj *samplev1alpha1.Sample, _ *samplev1alpha1.ProviderConfig, clusters spruntime.ClusterContext) (ctrl.Result, error) {
	if r.mode == modeNeverReady {
		spruntime.StatusProgressing(obj, "NeverReady", "this provider never gets a Sample ready (BROKEN_MODE=never-ready)")
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	c := clusters.MCPCluster.Client()
	err := c.Get(ctx, client.ObjectKey{Name: leftCRD}, &apiextensionsv1.CustomResourceDefinition{})
	if apierrors.IsNotFound(err) {
		err = c.Create(ctx, brokenCRD())
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("install CRD %s in the MCP cluster: %w", leftCRD, err)
	}
	spruntime.StatusReady(obj)
	return ctrl.Result{}, nil
}

// Delete reports done at once, leaving the CRD behind.
func (r *reconciler) Delete(context.Context, *samplev1alpha1.Sample, *samplev1alpha1.ProviderConfig, spruntime.ClusterContext) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

// brokenCRD is the CRD leave-crd installs.
func brokenCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: leftCRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "domain.sample.services.openmcp.cloud",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "BrokenObject", ListKind: "BrokenObjectList", Plural: "brokenobjects", Singular: "brokenobject"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}
