package provisioner

import (
	"testing"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func TestPlacementPlace(t *testing.T) {
	docker := func(version, ns string) osbv1alpha1.Source {
		return osbv1alpha1.Source{APIVersion: "deployment.servicefabrik.io/" + version, Kind: "Docker", Name: "d-1", Namespace: ns}
	}
	tests := map[string]struct {
		applied []osbv1alpha1.Source
		ref     osbv1alpha1.Source
		want    string
	}{
		"applied to the instance's namespace": {
			applied: []osbv1alpha1.Source{docker("v1alpha1", "tenant")},
			ref:     docker("v1alpha1", "default"), want: "tenant",
		},
		"another version of the applied object": {
			applied: []osbv1alpha1.Source{docker("v1beta1", "tenant")},
			ref:     docker("v1alpha1", "default"), want: "tenant",
		},
		"applied to the named namespace too": {
			applied: []osbv1alpha1.Source{docker("v1alpha1", "tenant"), docker("v1alpha1", "sf-x")},
			ref:     docker("v1alpha1", "sf-x"), want: "sf-x",
		},
		"nothing applied": {
			ref: docker("v1alpha1", "default"), want: "default",
		},
		"another object applied": {
			applied: []osbv1alpha1.Source{{APIVersion: "v1", Kind: "ConfigMap", Name: "d-1", Namespace: "tenant"}},
			ref:     docker("v1alpha1", "default"), want: "default",
		},
		"applied elsewhere only": {
			applied: []osbv1alpha1.Source{docker("v1alpha1", "sf-x")},
			ref:     docker("v1alpha1", "default"), want: "default",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := placement{namespace: "tenant", applied: tc.applied}
			if got := p.place(tc.ref).Namespace; got != tc.want {
				t.Errorf("place(%v) read from %q, want %q", tc.ref, got, tc.want)
			}
		})
	}
}

func TestPlacementAppliedInto(t *testing.T) {
	p := placement{namespace: "tenant", applied: []osbv1alpha1.Source{
		{APIVersion: "v1", Kind: "Namespace", Name: "sf-x"},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "c", Namespace: "sf-y"},
	}}
	for ns, want := range map[string]bool{"sf-x": true, "sf-y": true, "elsewhere": false} {
		if got := p.appliedInto(ns); got != want {
			t.Errorf("appliedInto(%q) = %v, want %v", ns, got, want)
		}
	}
}
