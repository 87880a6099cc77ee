package crdinstall_test

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/testenv"
)

func TestApply(t *testing.T) {
	c := testenv.Start(t, testenv.WithName("crdinstall"), testenv.WithCRDs())
	ctx := t.Context()
	platform, err := crds.ForCluster(crds.ClusterPlatform)
	if err != nil || len(platform) == 0 {
		t.Fatalf("platform CRDs: %d, %v", len(platform), err)
	}

	// Twice: the second run must be a no-op, not a conflict.
	for i := range 2 {
		if err := crdinstall.Apply(ctx, c.Client, "marketplane-test", 0, platform...); err != nil {
			t.Fatalf("Apply #%d: %v", i+1, err)
		}
	}
	for _, crd := range platform {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
			t.Fatalf("get %s: %v", crd.Name, err)
		}
		if got.Labels[crds.ClusterLabel] != crds.ClusterPlatform {
			t.Errorf("%s: label %s=%q, want %q", crd.Name, crds.ClusterLabel, got.Labels[crds.ClusterLabel], crds.ClusterPlatform)
		}
	}
	// Objects of the installed kinds are served at once.
	if err := c.Client.List(ctx, &apiextensionsv1.CustomResourceDefinitionList{}); err != nil {
		t.Fatal(err)
	}

	bad := platform[0].DeepCopy()
	bad.Name = "wrong.name.example.com" // must be <plural>.<group>
	err = crdinstall.Apply(ctx, c.Client, "marketplane-test", 5*time.Second, bad)
	if err == nil || !strings.Contains(err.Error(), "wrong.name.example.com") {
		t.Fatalf("Apply of an invalid CRD: want an error naming it, got %v", err)
	}
}
