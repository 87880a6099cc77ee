package validation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/marketplane/marketplane/pkg/manifests"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	controlplanev2alpha1 "github.com/marketplane/marketplane/api/controlplane/v2alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// Kinds a Spec treats specially.
var (
	serviceProviderKind     = providerv1alpha1.GroupVersion.WithKind("ServiceProvider")
	managedControlPlaneKind = corev2alpha1.GroupVersion.WithKind("ManagedControlPlane")
	controlPlaneKind        = controlplanev2alpha1.GroupVersion.WithKind("ControlPlane")
)

// isKind reports whether obj is of kind gvk, in any version of its group.
func isKind(obj *unstructured.Unstructured, gvk schema.GroupVersionKind) bool {
	got := obj.GroupVersionKind()
	return got.Group == gvk.Group && got.Kind == gvk.Kind
}

// isControlPlane reports whether obj is a ManagedControlPlane or a
// ControlPlane.
func isControlPlane(obj *unstructured.Unstructured) bool {
	return isKind(obj, managedControlPlaneKind) || isKind(obj, controlPlaneKind)
}

// unstructuredString reads a string field of obj.
func unstructuredString(obj *unstructured.Unstructured, fields ...string) (string, bool, error) {
	return unstructured.NestedString(obj.Object, fields...)
}

// SpecFromFiles reads a Spec from manifest files (YAML or JSON, several
// documents each): exactly one ServiceProvider, at most one
// ManagedControlPlane or ControlPlane, and the other objects, in file
// order. ClusterProviders and PlatformServices are not validated by this
// flow and are refused. Spec.Images is left empty.
func SpecFromFiles(files ...string) (Spec, error) {
	if len(files) == 0 {
		return Spec{}, fmt.Errorf("no manifest files given")
	}
	var r specReader
	for _, f := range files {
		if err := r.readFile(f); err != nil {
			return Spec{}, err
		}
	}
	return r.result(files)
}

// specReader collects a Spec from manifest files.
type specReader struct {
	spec Spec
	// providers and cps say where each ServiceProvider and control plane
	// was found, for messages.
	providers, cps []string
}

// readFile adds the objects of the manifest file f.
func (r *specReader) readFile(f string) error {
	data, err := os.ReadFile(f)
	if err != nil {
		return fmt.Errorf("read manifest: %w", err)
	}
	objs, err := manifests.Decode(data)
	if err != nil {
		return fmt.Errorf("manifest %s: %w", f, err)
	}
	for i, o := range objs {
		if err := r.add(f, i, o); err != nil {
			return err
		}
	}
	return nil
}

// add sorts the object o, document i of the file f, into the Spec.
func (r *specReader) add(f string, i int, o *unstructured.Unstructured) error {
	where := fmt.Sprintf("%s (%s %s)", filepath.Base(f), o.GetKind(), o.GetName())
	if o.GetName() == "" {
		return fmt.Errorf("manifest %s: document %d (%s %s) has no metadata.name", f, i, o.GetAPIVersion(), o.GetKind())
	}
	if strings.HasSuffix(o.GetKind(), "List") && o.Object["items"] != nil {
		return fmt.Errorf("manifest %s: document %d is a %s; write its items as documents of their own", f, i, o.GetKind())
	}
	switch {
	case isKind(o, serviceProviderKind):
		r.providers = append(r.providers, where)
		r.spec.Provider = o
	case o.GroupVersionKind().Group == providerv1alpha1.GroupVersion.Group && (o.GetKind() == "ClusterProvider" || o.GetKind() == "PlatformService"):
		return fmt.Errorf("manifest %s: %s %s: the validation flow validates ServiceProviders only", f, o.GetKind(), o.GetName())
	case isControlPlane(o):
		r.cps = append(r.cps, where)
		r.spec.ControlPlane = o
	default:
		if v := o.GetAnnotations()[AnnotationCluster]; v != "" && v != ClusterPlatform && v != ClusterOnboarding {
			return fmt.Errorf("manifest %s: %s: annotation %s is %q, want %q or %q", f, where, AnnotationCluster, v, ClusterPlatform, ClusterOnboarding)
		}
		r.spec.Objects = append(r.spec.Objects, o)
	}
	return nil
}

// result checks the counts of ServiceProviders and control planes read
// from files and returns the Spec.
func (r *specReader) result(files []string) (Spec, error) {
	switch {
	case len(r.providers) == 0:
		return Spec{}, fmt.Errorf("no ServiceProvider (%s) in %s: exactly one is needed", serviceProviderKind.GroupVersion(), strings.Join(files, ", "))
	case len(r.providers) > 1:
		return Spec{}, fmt.Errorf("%d ServiceProviders (%s): exactly one is needed", len(r.providers), strings.Join(r.providers, ", "))
	case len(r.cps) > 1:
		return Spec{}, fmt.Errorf("%d control planes (%s): at most one ManagedControlPlane or ControlPlane is allowed", len(r.cps), strings.Join(r.cps, ", "))
	}
	if image, _, _ := unstructuredString(r.spec.Provider, "spec", "image"); image == "" {
		return Spec{}, fmt.Errorf("%s: spec.image is empty", r.providers[0])
	}
	return r.spec, nil
}
