package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/marketplane/marketplane/api/common"
)

// TestBoundManifest checks the rewrite on the repository's CRDs: every
// quantity gets the bound and every list or map above one a bound of its
// own, a second run changes nothing (make verify-generate relies on it),
// and a CRD without quantities stays byte for byte as controller-gen wrote
// it.
func TestBoundManifest(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "api", "crds", "manifests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD manifests: %v", err)
	}
	quantities := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		once, err := boundManifest(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		twice, err := boundManifest(once)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(once, twice) {
			t.Errorf("%s: a second run changes the manifest", f)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(once, crd); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, v := range crd.Spec.Versions {
			visit(*v.Schema.OpenAPIV3Schema, nil, func(s apiextensionsv1.JSONSchemaProps, above []apiextensionsv1.JSONSchemaProps) {
				if !IsQuantity(&s) {
					return
				}
				found = true
				quantities++
				if s.MaxLength == nil || *s.MaxLength != common.QuantityMaxLength || len(s.XValidations) != 1 || s.XValidations[0].Rule != common.QuantityRule {
					t.Errorf("%s: a quantity without the bound: %+v", f, s)
				}
				for _, a := range above {
					if a.Items != nil && a.MaxItems == nil || a.AdditionalProperties != nil && a.MaxProperties == nil {
						t.Errorf("%s: a list or map above a quantity has no bound", f)
					}
				}
			})
		}
		if !found && !bytes.Equal(once, raw) {
			t.Errorf("%s holds no quantity, yet the rewrite changed it", f)
		}
		if found && !strings.HasPrefix(string(once), "---\napiVersion: apiextensions.k8s.io/v1\n") {
			t.Errorf("%s: the rewrite does not start as controller-gen's output does", f)
		}
	}
	if quantities == 0 {
		t.Error("no CRD holds a quantity; the test checks nothing")
	}
}

// visit calls fn for every schema below s with the schemas above it.
func visit(s apiextensionsv1.JSONSchemaProps, above []apiextensionsv1.JSONSchemaProps, fn func(apiextensionsv1.JSONSchemaProps, []apiextensionsv1.JSONSchemaProps)) {
	fn(s, above)
	above = append(above, s)
	for _, p := range s.Properties {
		visit(p, above, fn)
	}
	if s.Items != nil && s.Items.Schema != nil {
		visit(*s.Items.Schema, above, fn)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		visit(*s.AdditionalProperties.Schema, above, fn)
	}
}
