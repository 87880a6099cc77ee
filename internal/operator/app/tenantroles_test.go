package app

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAggregateTenantRolesFlag checks that the tenants' roles are on unless
// --aggregate-tenant-roles=false turns them off.
func TestAggregateTenantRolesFlag(t *testing.T) {
	f := newRunCommand(&options{}).Flags().Lookup("aggregate-tenant-roles")
	if f == nil {
		t.Fatal("run has no --aggregate-tenant-roles")
	}
	if f.DefValue != "true" {
		t.Errorf("--aggregate-tenant-roles defaults to %s, want true", f.DefValue)
	}
}

// TestOnboardingClientUntilKnown checks that the ServiceProvider reconciler
// gets no onboarding client until the onboarding starter found the cluster,
// and then the one it set.
func TestOnboardingClientUntilKnown(t *testing.T) {
	o := &onboardingClient{}
	if c, err := o.get(context.Background()); c != nil || err != nil {
		t.Fatalf("before the cluster is known: client %v, error %v; want none", c, err)
	}
	var want client.Client = struct{ client.Client }{}
	o.set(want)
	if c, err := o.get(context.Background()); c != want || err != nil {
		t.Errorf("after set: client %v, error %v; want the one set", c, err)
	}
}
