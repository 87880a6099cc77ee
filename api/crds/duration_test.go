package crds_test

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/api/install"
	"github.com/marketplane/marketplane/internal/crdtest"
	samplev1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
)

// durationRuleMessage is the message of common.Duration's CEL rule.
const durationRuleMessage = "must be a non-negative duration such as 30s, 5m or 1h30m"

// apiField is a field of a kind: its JSON path below the object ("[]"
// stands for the items of a list or the values of a map).
type apiField struct {
	GVK  schema.GroupVersionKind
	Path []string
}

func (f apiField) String() string { return f.GVK.Kind + " " + strings.Join(f.Path, ".") }

// wantDurationFields is every duration field of the kinds Marketplane
// serves and of the sample provider's. A new one is found by
// TestEveryDurationFieldIsTolerant; add it here and give it a base object
// in durationBaseObjects.
var wantDurationFields = []string{
	"AccessRequest spec.ttl",
	"ProviderConfig spec.limits.renderTimeout", // interoperator.services.openmcp.cloud
	"ProviderConfig spec.pollInterval",         // interoperator.services.openmcp.cloud
	"ProviderConfig spec.pollInterval",         // sample.services.openmcp.cloud
}

// forbiddenFieldTypes fail to decode a bad string, and with it the whole
// list of an informer (issue #10): API types use common.Duration instead.
// metav1.Time is not here: its schema format date-time has always been
// checked by the API server, so no stored object can hold a bad one.
var forbiddenFieldTypes = map[reflect.Type]string{
	reflect.TypeFor[metav1.Duration](): "metav1.Duration (use common.Duration)",
	reflect.TypeFor[time.Duration]():   "time.Duration (use common.Duration)",
}

// apiScheme returns the scheme of Marketplane's kinds and the sample
// provider's, and the API groups to look at.
func apiScheme(t *testing.T) (*runtime.Scheme, func(group string) bool) {
	t.Helper()
	s, err := install.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := samplev1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ours := func(group string) bool {
		return strings.HasSuffix(group, "openmcp.cloud") || strings.HasSuffix(group, "servicefabrik.io")
	}
	return s, ours
}

// durationFields walks the Go types of every kind and returns its
// common.Duration fields; fields of a forbidden type are errors.
func durationFields(t *testing.T) []apiField {
	t.Helper()
	s, ours := apiScheme(t)
	var out []apiField
	for gvk, typ := range s.AllKnownTypes() {
		if !ours(gvk.Group) || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		walkFields(typ, nil, nil, map[reflect.Type]bool{}, func(path []string, ft, _ reflect.Type) {
			if why, bad := forbiddenFieldTypes[ft]; bad {
				t.Errorf("%s %s is a %s", gvk.Kind, strings.Join(path, "."), why)
			}
			if ft == reflect.TypeFor[common.Duration]() {
				out = append(out, apiField{GVK: gvk, Path: slices.Clone(path)})
			}
		})
	}
	slices.SortFunc(out, func(a, b apiField) int {
		return strings.Compare(a.GVK.String()+a.String(), b.GVK.String()+b.String())
	})
	return out
}

// walkFields calls visit for every field type below typ with its JSON path
// (inlined structs add no element; slices and maps add "[]") and the struct
// type that declares the field (owner; the items of a list or map keep the
// owner of the list or map).
func walkFields(typ reflect.Type, path []string, owner reflect.Type, seen map[reflect.Type]bool, visit func(path []string, typ, owner reflect.Type)) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	visit(path, typ, owner)
	switch typ.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		walkFields(typ.Elem(), append(path, "[]"), owner, seen, visit)
	case reflect.Struct:
		if seen[typ] || typ == reflect.TypeFor[metav1.ObjectMeta]() || typ == reflect.TypeFor[runtime.RawExtension]() {
			return
		}
		seen[typ] = true
		defer delete(seen, typ)
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
				walkFields(f.Type, path, typ, seen, visit)
				continue
			}
			if name == "" {
				name = f.Name
			}
			walkFields(f.Type, append(slices.Clone(path), name), typ, seen, visit)
		}
	}
}

// TestEveryDurationFieldIsTolerant checks, without an API server, that no
// kind has a duration field whose decoding fails on a bad string, that the
// duration fields are the known ones, and that each carries
// common.Duration's rule in its CRD. Quantities, whose decoding can also
// fail or never end, have TestEveryQuantityFieldIsBounded.
func TestEveryDurationFieldIsTolerant(t *testing.T) {
	fields := durationFields(t)
	var got []string
	for _, f := range fields {
		got = append(got, f.String())
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(wantDurationFields))
	if !slices.Equal(got, want) {
		t.Errorf("duration fields = %q, want %q; each new one needs a test (wantDurationFields, durationBaseObjects)", got, want)
	}
	all := allCRDs(t)
	for _, f := range fields {
		prop, err := crdProperty(all, f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if prop.Type != "string" || len(prop.XValidations) != 1 ||
			!strings.Contains(prop.XValidations[0].Rule, "duration(self)") || !strings.HasPrefix(prop.XValidations[0].Message, durationRuleMessage) {
			t.Errorf("%s: schema type %q, rules %+v; want a string with common.Duration's rule", f, prop.Type, prop.XValidations)
		}
	}
}

// allCRDs returns Marketplane's CRDs and the sample provider's.
func allCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	all, err := servedCRDs()
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// crdProperty returns the schema of the field in the served version of its
// CRD.
func crdProperty(all []*apiextensionsv1.CustomResourceDefinition, f apiField) (apiextensionsv1.JSONSchemaProps, error) {
	chain, err := crdSchemaPath(all, f)
	if err != nil {
		return apiextensionsv1.JSONSchemaProps{}, err
	}
	return chain[len(chain)-1], nil
}

// crdSchemaPath returns the schemas from the root of the served version of
// the field's CRD down to the field: one for the root and one for each
// element of its path.
func crdSchemaPath(all []*apiextensionsv1.CustomResourceDefinition, f apiField) ([]apiextensionsv1.JSONSchemaProps, error) {
	crd := crdOf(all, f.GVK)
	if crd == nil {
		return nil, fmt.Errorf("no CRD of %s", f.GVK)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != f.GVK.Version {
			continue
		}
		chain := []apiextensionsv1.JSONSchemaProps{*v.Schema.OpenAPIV3Schema}
		for _, name := range f.Path {
			p := chain[len(chain)-1]
			switch {
			case name != "[]":
				child, ok := p.Properties[name]
				if !ok {
					return nil, fmt.Errorf("CRD %s has no property %s", crd.Name, name)
				}
				p = child
			case p.Items != nil && p.Items.Schema != nil:
				p = *p.Items.Schema
			case p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil:
				p = *p.AdditionalProperties.Schema
			default:
				return nil, fmt.Errorf("CRD %s has neither items nor values at %s", crd.Name, f)
			}
			chain = append(chain, p)
		}
		return chain, nil
	}
	return nil, fmt.Errorf("CRD %s does not serve %s", crd.Name, f.GVK.Version)
}

// crdOf returns the CRD of gvk's group and kind, nil when there is none.
func crdOf(all []*apiextensionsv1.CustomResourceDefinition, gvk schema.GroupVersionKind) *apiextensionsv1.CustomResourceDefinition {
	for _, crd := range all {
		if crd.Spec.Group == gvk.Group && crd.Spec.Names.Kind == gvk.Kind {
			return crd
		}
	}
	return nil
}

// durationBaseObjects are valid objects of the kinds with duration fields;
// the test sets the field on a copy.
func durationBaseObjects(ns string) map[schema.GroupKind]map[string]any {
	return map[schema.GroupKind]map[string]any{
		{Group: "clusters.openmcp.cloud", Kind: "AccessRequest"}: {
			"metadata": map[string]any{"namespace": ns},
			"spec": map[string]any{
				"clusterRef": map[string]any{"name": "c", "namespace": ns},
				"token":      map[string]any{},
			},
		},
		{Group: "interoperator.services.openmcp.cloud", Kind: "ProviderConfig"}: {"spec": map[string]any{}},
		{Group: samplev1alpha1.GroupVersion.Group, Kind: "ProviderConfig"}:      {"spec": map[string]any{"versions": []any{"v1"}}},
	}
}

// TestDurationFieldsOnAPIServer sends every string of the corpus in every
// duration field to a real API server (dry run): it accepts exactly what
// common.Duration's Parse accepts, and refuses the rest with the rule's
// message naming the field, so that CEL's duration() and
// time.ParseDuration are checked to agree rather than assumed to.
func TestDurationFieldsOnAPIServer(t *testing.T) {
	c := apiServer(t)
	const ns = "durations"
	if err := c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	bases := durationBaseObjects(ns)
	for _, f := range durationFields(t) {
		t.Run(strings.ReplaceAll(f.GVK.Group+"/"+f.String(), " ", "_"), func(t *testing.T) {
			base, ok := bases[f.GVK.GroupKind()]
			if !ok {
				t.Fatalf("no base object for %s in durationBaseObjects", f.GVK.GroupKind())
			}
			for i, value := range crdtest.DurationCorpus {
				obj := durationObject(f, base, fmt.Sprintf("d-%d", i), value)
				err := c.Client.Create(t.Context(), obj, client.DryRunAll)
				d := common.Duration(value)
				_, parseErr := d.Parse()
				switch {
				case parseErr == nil && err != nil:
					t.Errorf("%q: Parse accepts it, the API server refuses it: %v", value, err)
				case parseErr != nil && err == nil:
					t.Errorf("%q: Parse refuses it (%v), the API server accepts it", value, parseErr)
				case err != nil && !apierrors.IsInvalid(err):
					t.Errorf("%q: refused with %v, want 422 Invalid", value, err)
				case err != nil && !strings.Contains(err.Error(), strings.Join(f.Path, ".")):
					t.Errorf("%q: the refusal does not name the field %s: %v", value, strings.Join(f.Path, "."), err)
				case err != nil && !strings.Contains(err.Error(), durationRuleMessage) && !tooLarge(value):
					// Only values too large for a time.Duration get
					// past the rule's pattern to a conversion error.
					t.Errorf("%q: refused without the rule's message: %v", value, err)
				}
			}
		})
	}
}

// tooLarge reports whether value matches common.DurationPattern, which the
// rule checks first, and yet time.ParseDuration refuses it: then only its
// size can be the reason.
func tooLarge(value string) bool {
	_, err := time.ParseDuration(value)
	return err != nil && durationPattern.MatchString(value)
}

var durationPattern = regexp.MustCompile(common.DurationPattern)

// durationObject returns a copy of base of the field's kind with the field
// set to value.
func durationObject(f apiField, base map[string]any, name, value string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(base)}
	obj.SetGroupVersionKind(f.GVK)
	obj.SetName(name)
	m := obj.Object
	for _, p := range f.Path[:len(f.Path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[f.Path[len(f.Path)-1]] = value
	return obj
}
