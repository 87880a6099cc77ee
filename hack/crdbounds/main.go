// Command crdbounds gives every quantity of the CRDs that controller-gen
// generated the bound of api/common (QuantityRule, QuantityMaxLength), so
// that the API server refuses a quantity whose parsing or arithmetic would
// take practically forever (docs/api.md, "Quantities").
//
// controller-gen cannot: it writes Kubernetes' own schema for every
// resource.Quantity, and its markers reach neither the values of a map
// (corev1.ResourceList) nor the fields of Kubernetes' types (the quantities
// in a provider's extraVolumes). A quantity is recognised by that schema:
// x-kubernetes-int-or-string with Kubernetes' quantity pattern. Every list
// and map on the way from the root to a quantity must have a bound of its
// own (maxItems, maxProperties), or the CRD's CEL cost estimate would count
// the rule as run for every value a 3 MiB request can hold; those of
// Kubernetes' types, which no marker reaches, get ContainerBound.
//
// `make generate` runs it after controller-gen; running it again changes
// nothing. Usage: go run ./hack/crdbounds DIR...
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/marketplane/marketplane/api/common"
)

// KubeQuantityPattern is the pattern controller-gen writes for a
// resource.Quantity: Kubernetes' quantity syntax.
const KubeQuantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// ContainerBound is the maxItems or maxProperties given to a list or map of
// Kubernetes' types that holds quantities and has no bound: the resource
// lists of an ephemeral volume's claim, the items of a downwardAPI volume
// and the sources of a projected one. Pods use a handful of each; with 16,
// the rules of a provider's 64 extraVolumes stay within the CRD's CEL cost
// budget.
const ContainerBound = 16

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdbounds DIR...")
		os.Exit(2)
	}
	for _, dir := range os.Args[1:] {
		if err := boundDir(dir); err != nil {
			fmt.Fprintln(os.Stderr, "crdbounds:", err)
			os.Exit(1)
		}
	}
}

// boundDir rewrites every CRD manifest in dir that holds a quantity.
func boundDir(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		out, err := boundManifest(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if bytes.Equal(out, raw) {
			continue
		}
		if err := os.WriteFile(f, out, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", f, err)
		}
	}
	return nil
}

// boundManifest returns the CRD manifest raw with every quantity bounded,
// written as controller-gen writes it; raw itself when it holds none.
func boundManifest(raw []byte) ([]byte, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	found := false
	for i := range crd.Spec.Versions {
		if s := crd.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			if Bound(s.OpenAPIV3Schema) {
				found = true
			}
		}
	}
	if !found {
		return raw, nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	data, err := yaml.Marshal(u)
	if err != nil {
		return nil, fmt.Errorf("marshal: %w", err)
	}
	return append([]byte("---\n"), data...), nil
}

// Bound gives every quantity below s the bound and every unbounded list or
// map on the way to one ContainerBound, and reports whether s holds a
// quantity.
func Bound(s *apiextensionsv1.JSONSchemaProps) bool {
	if IsQuantity(s) {
		n := int64(common.QuantityMaxLength)
		s.MaxLength = &n
		rule := apiextensionsv1.ValidationRule{Rule: common.QuantityRule, Message: common.QuantityMessage}
		s.XValidations = slices.DeleteFunc(s.XValidations, func(r apiextensionsv1.ValidationRule) bool { return r.Rule == rule.Rule })
		s.XValidations = append(s.XValidations, rule)
		return true
	}
	found := false
	for name, p := range s.Properties {
		if Bound(&p) {
			s.Properties[name] = p
			found = true
		}
	}
	if s.Items != nil && s.Items.Schema != nil && Bound(s.Items.Schema) {
		found = true
		if s.MaxItems == nil {
			n := int64(ContainerBound)
			s.MaxItems = &n
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil && Bound(s.AdditionalProperties.Schema) {
		found = true
		if s.MaxProperties == nil {
			n := int64(ContainerBound)
			s.MaxProperties = &n
		}
	}
	return found
}

// IsQuantity reports whether s is the schema controller-gen writes for a
// resource.Quantity.
func IsQuantity(s *apiextensionsv1.JSONSchemaProps) bool {
	return s.XIntOrString && s.Pattern == KubeQuantityPattern
}
