package charts_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/marketplane/marketplane/charts"
)

// digest is a well-formed sha256 digest for the tests.
const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestImageRegistryRequired: the chart has no default registry. Without
// global.imageRegistry and without a component's image.registry the render
// fails and names the values to set; with them, every image is under the
// registry given, and a digest replaces the tag.
func TestImageRegistryRequired(t *testing.T) {
	perImage := func(extra map[string]any) map[string]any {
		v := map[string]any{}
		for _, c := range []string{"operator", "interoperator", "marketplace", "broker", "console"} {
			img := map[string]any{"registry": "images.example.com/" + c}
			for k, val := range extra {
				img[k] = val
			}
			v[c] = map[string]any{"image": img}
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		reason  string
		values  map[string]any
		wantErr []string
		// want maps "kind/name" to the image it must have.
		want map[string]string
	}{
		{
			name:    "no registry",
			reason:  "the default values name no registry: the render must say which value to set",
			values:  nil,
			wantErr: []string{"global.imageRegistry", ".image.registry"},
		},
		{
			name:    "one component without a registry",
			reason:  "a per-image registry for some components leaves the others without one",
			values:  map[string]any{"operator": map[string]any{"image": map[string]any{"registry": "registry.example.com"}}},
			wantErr: []string{"global.imageRegistry"},
		},
		{
			name:   "global registry",
			reason: "global.imageRegistry applies to every image",
			values: map[string]any{"global": map[string]any{"imageRegistry": "registry.example.com:5000/mirror"}},
			want: map[string]string{
				"Deployment/marketplane-operator": "registry.example.com:5000/mirror/marketplane/marketplane-operator:0.1.0",
				"Deployment/marketplane-broker":   "registry.example.com:5000/mirror/marketplane/marketplane-broker:0.1.0",
				"Deployment/marketplane-console":  "registry.example.com:5000/mirror/marketplane/marketplane:0.1.0",
				"ServiceProvider/interoperator":   "registry.example.com:5000/mirror/marketplane/marketplane-interoperator:0.1.0",
				"PlatformService/marketplace":     "registry.example.com:5000/mirror/marketplane/marketplane-marketplace:0.1.0",
			},
		},
		{
			name:   "per-image registries without a global one",
			reason: "each image given in full needs no global registry",
			values: perImage(nil),
			want: map[string]string{
				"Deployment/marketplane-operator": "images.example.com/operator/marketplane/marketplane-operator:0.1.0",
				"ServiceProvider/interoperator":   "images.example.com/interoperator/marketplane/marketplane-interoperator:0.1.0",
			},
		},
		{
			name:   "digests",
			reason: "a digest replaces the tag",
			values: perImage(map[string]any{"digest": digest, "tag": "ignored"}),
			want: map[string]string{
				"Deployment/marketplane-broker": "images.example.com/broker/marketplane/marketplane-broker@" + digest,
				"PlatformService/marketplace":   "images.example.com/marketplace/marketplane/marketplane-marketplace@" + digest,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := charts.Render(tc.values)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("%s: Render succeeded", tc.reason)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error does not name %q:\n%v", tc.reason, w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			got := map[string]string{}
			for key := range tc.want {
				kind, name, _ := strings.Cut(key, "/")
				got[key] = imageOf(t, mustFind(t, objs, kind, name))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: images (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// imageOf returns a provider's spec.image or a Deployment's first container
// image.
func imageOf(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	if o.GetKind() == "Deployment" {
		return nested[string](t, o, "spec", "template", "spec", "containers", "0", "image")
	}
	return nested[string](t, o, "spec", "image")
}
