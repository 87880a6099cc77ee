package validation_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/validation"
)

func TestSpecFromFiles(t *testing.T) {
	spec, err := validation.SpecFromFiles("testdata/good/all.yaml", "testdata/good/objects.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Provider == nil || spec.Provider.GetName() != "sample" {
		t.Errorf("Provider = %v, want the ServiceProvider sample", spec.Provider)
	}
	if spec.ControlPlane == nil || spec.ControlPlane.GetKind() != "ControlPlane" || spec.ControlPlane.GetName() != "demo" {
		t.Errorf("ControlPlane = %v, want the ControlPlane demo", spec.ControlPlane)
	}
	var got []string
	for _, o := range spec.Objects {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if want := "ConfigMap/settings ProviderConfig/sample Sample/demo"; strings.Join(got, " ") != want {
		t.Errorf("Objects = %v, want %s (file order, without the provider and the control plane)", got, want)
	}

	sample, err := filepath.Glob("../../examples/validate/sample/*.yaml")
	if err != nil || len(sample) != 3 {
		t.Fatalf("examples/validate/sample: %v %v", sample, err)
	}
	if _, err := validation.SpecFromFiles(sample...); err != nil {
		t.Errorf("examples/validate/sample: %v", err)
	}
}

func TestSpecFromFilesRefuses(t *testing.T) {
	provider := "testdata/broken/probe.yaml"
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{nil, "no manifest files"},
		{[]string{"testdata/does-not-exist.yaml"}, "does-not-exist.yaml"},
		{[]string{"testdata/good/objects.yaml"}, "no ServiceProvider"},
		{[]string{"testdata/bad/two-providers.yaml"}, "2 ServiceProviders (two-providers.yaml (ServiceProvider one), two-providers.yaml (ServiceProvider two))"},
		{[]string{provider, "testdata/bad/two-controlplanes.yaml"}, "2 control planes"},
		{[]string{provider, "testdata/bad/no-kind.yaml"}, "no-kind.yaml: document 0 has no apiVersion or kind"},
		{[]string{provider, "testdata/bad/no-name.yaml"}, "no-name.yaml: document 0 (v1 ConfigMap) has no metadata.name"},
		{[]string{provider, "testdata/bad/bad-annotation.yaml"}, `annotation validation.marketplane.io/cluster is "workload"`},
		{[]string{provider, "testdata/bad/cluster-provider.yaml"}, "ClusterProvider kind: the validation flow validates ServiceProviders only"},
		{[]string{"testdata/bad/no-image.yaml"}, "ServiceProvider imageless): spec.image is empty"},
		{[]string{provider, "testdata/bad/not-yaml.yaml"}, "not-yaml.yaml"},
	} {
		_, err := validation.SpecFromFiles(tc.files...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SpecFromFiles(%v) = %v, want an error containing %q", tc.files, err, tc.want)
		}
	}
}
