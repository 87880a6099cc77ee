// Package e2e validates the sample provider end to end with Marketplane's
// validation flow (pkg/validation), as openMCP's provider validation does:
// deploy the provider's own binary through the operator, wait until it is
// initialized and Ready, request the service for a tenant's control plane,
// check the DomainServiceAPI there, delete everything and wait until it is
// gone. The manifests are the ones in config/.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/testenv"
	"github.com/marketplane/marketplane/pkg/validation"

	"github.com/marketplane/marketplane/providers/sample/internal/controller"
)

// manifests are the ServiceProvider, its ProviderConfig and a tenant's
// Sample, relative to this package.
var manifests = []string{
	"../../config/serviceprovider.yaml",
	"../../config/providerconfig.yaml",
	"../../config/sample-sample.yaml",
}

// TestValidate builds the provider's binary and runs the validation flow on
// an in-process landscape (API servers and the operator in this process, the
// provider as local processes): the ServiceProvider's image runs the binary
// built here. It needs the API-server binaries (KUBEBUILDER_ASSETS) and
// skips under -short.
func TestValidate(t *testing.T) {
	testenv.SkipIfShort(t)
	// The landscape's controllers log nothing; a failed step carries the
	// provider's own logs.
	ctrl.SetLogger(logr.Discard())
	bin := t.TempDir()
	testenv.BuildBinaries(t, bin, "github.com/marketplane/marketplane/providers/sample/cmd/sample")

	spec, err := validation.SpecFromFiles(manifests...)
	if err != nil {
		t.Fatal(err)
	}
	image, _, err := unstructured.NestedString(spec.Provider.Object, "spec", "image")
	if err != nil {
		t.Fatalf("spec.image of the ServiceProvider: %v", err)
	}
	spec.Images = map[string]string{image: filepath.Join(bin, "sample")}
	validation.Validate(t, spec, providertest.InProcess(), validation.WithCheck(checkDomainServiceAPI))
}

// checkDomainServiceAPI checks, with the tenant's own kubeconfig, that the
// control plane serves the DomainServiceAPI the provider installed: its CRD
// is there, and a SampleObject can be created, read back and deleted.
func checkDomainServiceAPI(ctx context.Context, env validation.CheckEnv) error {
	if env.ControlPlane == nil {
		return errors.New("the flow created no control plane for the Sample")
	}
	mcp := env.ControlPlane.Client
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := mcp.Get(ctx, client.ObjectKey{Name: controller.DomainCRDName}, crd); err != nil {
		return fmt.Errorf("get CRD %s in the control plane: %w", controller.DomainCRDName, err)
	}

	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(controller.DomainGroupVersion.WithKind(controller.DomainKind))
	obj.SetNamespace(metav1.NamespaceDefault)
	obj.SetName("validation")
	const note = "written by the validation check"
	if err := unstructured.SetNestedField(obj.Object, note, "spec", "note"); err != nil {
		return fmt.Errorf("build a SampleObject: %w", err)
	}
	if err := mcp.Create(ctx, obj); err != nil {
		return fmt.Errorf("create SampleObject %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	if err := mcp.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		return fmt.Errorf("read SampleObject %s/%s back: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "spec", "note"); v != note {
		return fmt.Errorf("SampleObject %s/%s reads back spec.note %q, want %q", obj.GetNamespace(), obj.GetName(), v, note)
	}
	if err := mcp.Delete(ctx, got); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete SampleObject %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	fmt.Fprintf(env.Out, "CRD %s served in %s %s/%s: created, read and deleted SampleObject %s/%s\n",
		crd.Name, env.ControlPlane.Kind, env.ControlPlane.Namespace, env.ControlPlane.Name, obj.GetNamespace(), obj.GetName())
	return nil
}
