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
	var (
		spec      Spec
		providers []string
		cps       []string
	)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return Spec{}, fmt.Errorf("read manifest: %w", err)
		}
		objs, err := manifests.Decode(data)
		if err != nil {
			return Spec{}, fmt.Errorf("manifest %s: %w", f, err)
		}
		for i, o := range objs {
			where := fmt.Sprintf("%s (%s %s)", filepath.Base(f), o.GetKind(), o.GetName())
			if o.GetName() == "" {
				return Spec{}, fmt.Errorf("manifest %s: document %d (%s %s) has no metadata.name", f, i, o.GetAPIVersion(), o.GetKind())
			}
			if strings.HasSuffix(o.GetKind(), "List") && o.Object["items"] != nil {
				return Spec{}, fmt.Errorf("manifest %s: document %d is a %s; write its items as documents of their own", f, i, o.GetKind())
			}
			switch {
			case isKind(o, serviceProviderKind):
				providers = append(providers, where)
				spec.Provider = o
			case o.GroupVersionKind().Group == providerv1alpha1.GroupVersion.Group && (o.GetKind() == "ClusterProvider" || o.GetKind() == "PlatformService"):
				return Spec{}, fmt.Errorf("manifest %s: %s %s: the validation flow validates ServiceProviders only", f, o.GetKind(), o.GetName())
			case isControlPlane(o):
				cps = append(cps, where)
				spec.ControlPlane = o
			default:
				if v := o.GetAnnotations()[AnnotationCluster]; v != "" && v != ClusterPlatform && v != ClusterOnboarding {
					return Spec{}, fmt.Errorf("manifest %s: %s: annotation %s is %q, want %q or %q", f, where, AnnotationCluster, v, ClusterPlatform, ClusterOnboarding)
				}
				spec.Objects = append(spec.Objects, o)
			}
		}
	}
	switch {
	case len(providers) == 0:
		return Spec{}, fmt.Errorf("no ServiceProvider (%s) in %s: exactly one is needed", serviceProviderKind.GroupVersion(), strings.Join(files, ", "))
	case len(providers) > 1:
		return Spec{}, fmt.Errorf("%d ServiceProviders (%s): exactly one is needed", len(providers), strings.Join(providers, ", "))
	case len(cps) > 1:
		return Spec{}, fmt.Errorf("%d control planes (%s): at most one ManagedControlPlane or ControlPlane is allowed", len(cps), strings.Join(cps, ", "))
	}
	if image, _, _ := unstructuredString(spec.Provider, "spec", "image"); image == "" {
		return Spec{}, fmt.Errorf("%s: spec.image is empty", providers[0])
	}
	return spec, nil
}
