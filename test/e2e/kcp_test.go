package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/validation"
)

// sampleManifests are the sample provider's validation manifests
// (examples/validate/sample): no spec.workload, so its domain service's
// workload is a namespace per Sample on the workload cluster and nothing
// runs in the MCP but its API.
var sampleManifests = []string{
	"../../examples/validate/sample/serviceprovider.yaml",
	"../../examples/validate/sample/providerconfig.yaml",
	"../../examples/validate/sample/sample.yaml",
}

// sampleObjects is the sample's DomainServiceAPI.
var sampleObjects = schema.GroupVersionKind{Group: "domain.sample.services.openmcp.cloud", Version: "v1alpha1", Kind: "SampleObject"}

// TestValidateSampleKCP runs the validation flow (library call) for the
// sample provider on an in-process target whose MCPs are kcp workspaces
// (providertest.WithKCP): the provider installs its DomainServiceAPI into
// the tenant's workspace and keeps its workload on the workload cluster;
// the check uses the API there with the tenant's kubeconfig. Every step
// passes.
func TestValidateSampleKCP(t *testing.T) {
	bin := binaries(t)
	t.Parallel()
	spec, err := validation.SpecFromFiles(sampleManifests...)
	if err != nil {
		t.Fatal(err)
	}
	image, _, err := unstructured.NestedString(spec.Provider.Object, "spec", "image")
	if err != nil || image == "" {
		t.Fatalf("spec.image of the ServiceProvider: %q, %v", image, err)
	}
	spec.Images = map[string]string{image: filepath.Join(bin, "sample")}
	rep := validation.Validate(t, spec, providertest.InProcess(providertest.WithKCP()),
		validation.WithCheck(checkSampleInWorkspace), validation.WithTimeout(3*time.Minute))
	for _, s := range rep.Steps {
		if s.Result != validation.ResultPassed {
			t.Errorf("step %s: %s %q, want passed", s.ID, s.Result, s.Message)
		}
	}
	if msg := stepsByID(*rep)[validation.StepCheck].Message; !strings.Contains(msg, "kcp workspace root:") {
		t.Errorf("check step: message %q does not name the kcp workspace", msg)
	}
}

// checkSampleInWorkspace checks that the tenant's control plane is a kcp
// workspace serving the sample's DomainServiceAPI: its CRD is there, and a
// SampleObject can be created, read back and deleted with the tenant's own
// kubeconfig.
func checkSampleInWorkspace(ctx context.Context, env validation.CheckEnv) error {
	if env.ControlPlane == nil {
		return errors.New("the flow created no control plane for the Sample")
	}
	_, workspace, ok := strings.Cut(env.ControlPlane.Config.Host, "/clusters/")
	if !ok || !strings.HasPrefix(workspace, "root:") {
		return fmt.Errorf("the tenant's kubeconfig points at %s, not at a kcp workspace", env.ControlPlane.Config.Host)
	}
	mcp := env.ControlPlane.Client
	crdName := "sampleobjects." + sampleObjects.Group
	if err := mcp.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		return fmt.Errorf("get CRD %s in the workspace: %w", crdName, err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(sampleObjects)
	obj.SetNamespace(metav1.NamespaceDefault)
	obj.SetName("validation")
	if err := unstructured.SetNestedField(obj.Object, "written in a kcp workspace", "spec", "note"); err != nil {
		return err
	}
	if err := mcp.Create(ctx, obj); err != nil {
		return fmt.Errorf("create SampleObject %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(sampleObjects)
	if err := mcp.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		return fmt.Errorf("read SampleObject %s/%s back: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if err := mcp.Delete(ctx, got); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete SampleObject %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	fmt.Fprintf(env.Out, "CRD %s served in kcp workspace %s of %s %s/%s: created, read and deleted SampleObject %s/%s\n",
		crdName, workspace, env.ControlPlane.Kind, env.ControlPlane.Namespace, env.ControlPlane.Name, obj.GetNamespace(), obj.GetName())
	return nil
}

// TestValidateInterOperatorKCP is TestValidateInterOperator on a target
// whose MCPs are kcp workspaces: the inter-operator's instances live on the
// workload cluster, so it passes there unchanged.
func TestValidateInterOperatorKCP(t *testing.T) {
	validateInterOperator(t, providertest.WithKCP())
}
