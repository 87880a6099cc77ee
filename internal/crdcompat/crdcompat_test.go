package crdcompat

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/marketplane/marketplane/api/crds"
)

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	spec := apiextensionsv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"size"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"size":   {Type: "integer"},
			"tier":   {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"small"`)}, {Raw: []byte(`"large"`)}}},
			"labels": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
			"ports":  {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"port": {Type: "integer"}}}}},
			"values": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		},
	}
	return &apiextensionsv1.CustomResourceDefinition{
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.marketplane.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// spec returns the spec schema of next's only version, for a change.
func spec(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
	s := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	return &s
}

func setSpec(c *apiextensionsv1.CustomResourceDefinition, s *apiextensionsv1.JSONSchemaProps) {
	c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = *s
}

func TestCompare(t *testing.T) {
	cases := map[string]struct {
		reason string
		change func(c *apiextensionsv1.CustomResourceDefinition)
		want   string // a substring of the only problem; empty: none
	}{
		"Same": {reason: "an unchanged CRD replaces itself", change: func(*apiextensionsv1.CustomResourceDefinition) {}},
		"NewOptionalField": {reason: "adding an optional field loses nothing", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c)
			s.Properties["color"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			setSpec(c, s)
		}},
		"NewRequiredFieldWithDefault": {reason: "a defaulted field is filled in on read", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c)
			s.Properties["color"] = apiextensionsv1.JSONSchemaProps{Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"red"`)}}
			s.Required = append(s.Required, "color")
			setSpec(c, s)
		}},
		"NewVersion": {reason: "a new served version beside the old one is fine", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			v := *c.Spec.Versions[0].DeepCopy()
			v.Name, v.Storage = "v1beta1", false
			c.Spec.Versions = append(c.Spec.Versions, v)
		}},
		"FieldRemoved": {reason: "a removed field is pruned from stored objects", want: `field "tier" was removed`, change: func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c)
			delete(s.Properties, "tier")
			setSpec(c, s)
		}},
		"ItemFieldRemoved": {reason: "fields of list items count too", want: `v1alpha1 spec.ports[]: field "port" was removed`, change: func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c)
			s.Properties["ports"].Items.Schema.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
			setSpec(c, s)
		}},
		"TypeChanged": {reason: "a stored integer does not validate as a string", want: `spec.size: type changed from "integer" to "string"`, change: func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c)
			s.Properties["size"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			setSpec(c, s)
		}},
		"EnumNarrowed": {reason: "a stored value outside the enum fails the next update", want: `enum value "large" was dropped`, change: func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c)
			s.Properties["tier"] = apiextensionsv1.JSONSchemaProps{Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"small"`)}}}
			setSpec(c, s)
		}},
		"NewlyRequired": {reason: "old objects lack the field", want: `field "tier" is newly required`, change: func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c)
			s.Required = append(s.Required, "tier")
			setSpec(c, s)
		}},
		"PreserveDropped": {reason: "free-form values would be pruned", want: "unknown fields were kept and would now be pruned", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c)
			s.Properties["values"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
			setSpec(c, s)
		}},
		"MapValuesDropped": {reason: "a map's value schema removed", want: "the schema of its map values was removed", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c)
			s.Properties["labels"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
			setSpec(c, s)
		}},
		"NotServed": {reason: "stored objects of an unserved version cannot be read", want: "version v1alpha1 is no longer served", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Served = false
		}},
		"StorageMovedWithoutConversion": {reason: "objects stored in the old version need converting", want: "storage version moved from v1alpha1 to v1beta1 without a conversion webhook", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			v := *c.Spec.Versions[0].DeepCopy()
			v.Name = "v1beta1"
			c.Spec.Versions[0].Storage = false
			c.Spec.Versions = append(c.Spec.Versions, v)
		}},
		"ScopeChanged": {reason: "namespaced objects cannot become cluster-scoped", want: "scope changed", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Scope = apiextensionsv1.ClusterScoped
		}},
		"StatusLost": {reason: "status writes would fail", want: "lost its status subresource", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Subresources = nil
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			prev, next := widgetCRD(), widgetCRD()
			tc.change(next)
			got := Compare(prev, next)
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("%s: want no problems, got %q", tc.reason, got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("%s: want one problem containing %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}

func TestCompareAllNamesRemovedCRDs(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if got := CompareAll(all, all); len(got) != 0 {
		t.Errorf("the project's CRDs against themselves: %q", got)
	}
	got := CompareAll(all, all[1:])
	if len(got) != 1 || got[0] != all[0].Name+": removed" {
		t.Errorf("CompareAll without %s = %q, want it named as removed", all[0].Name, got)
	}
}
