package provisioner

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func TestInstanceID(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := map[string]struct {
		reason          string
		namespace, name string
		want            string
	}{
		"Broker": {
			reason:    "An instance in the broker's namespace sf-<name> keeps its name, the OSB instance id: Service Fabrik's sf-<instance id> is unchanged.",
			namespace: "sf-6f1e2d3c-0000-4000-8000-00000000a001", name: "6f1e2d3c-0000-4000-8000-00000000a001",
			want: "6f1e2d3c-0000-4000-8000-00000000a001",
		},
		"Tenant": {
			reason:    "An instance a tenant made gets its name and 16 hex digits of the SHA-256 of namespace/name.",
			namespace: "team-a", name: "db", want: "db-" + sha256Hex("team-a/db")[:16],
		},
		"Dots": {
			reason:    "Dots, which namespace names lack, become dashes.",
			namespace: "team-a", name: "my.db", want: "my-db-" + sha256Hex("team-a/my.db")[:16],
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := InstanceID(tc.namespace, tc.name); got != tc.want {
				t.Errorf("%s\nInstanceID(%q, %q) = %q, want %q", tc.reason, tc.namespace, tc.name, got, tc.want)
			}
		})
	}

	// Two tenants, one name: two ids. Nor can a name that ends like a hash
	// take another's id.
	a, b := InstanceID("team-a", "db"), InstanceID("team-b", "db")
	if a == b || !strings.HasPrefix(a, "db-") || len(a) != len("db-")+idHashLength {
		t.Errorf("ids of db in team-a and team-b: %q and %q, want two ids db-<16 hex digits>", a, b)
	}
	if c := InstanceID("team-b", a); c == a {
		t.Errorf("an instance named like another's id gets that id: %q", c)
	}
	// The broker's layout is decided by the namespace: the same name in
	// another namespace is hashed.
	if got := InstanceID("sf-x", "x"); got != "x" {
		t.Errorf("InstanceID(sf-x, x) = %q, want x", got)
	}
	if got := InstanceID("team-a", "x"); got == "x" {
		t.Errorf("InstanceID(team-a, x) = %q, want a hashed id", got)
	}
	// Every id makes a valid namespace sf-<id>, also from the longest and
	// dotted names.
	for _, n := range [][2]string{{"t", long}, {"t", "a.b.c"}, {"t", strings.Repeat("ab.", 20) + "c"}, {"t", strings.Repeat("a", 42) + "-b"}, {"sf-" + long[:60], long[:60]}} {
		id := InstanceID(n[0], n[1])
		if errs := validation.IsDNS1123Label("sf-" + id); len(errs) > 0 {
			t.Errorf("InstanceID(%q, %q) = %q: sf-<id> is no namespace name: %v", n[0], n[1], id, errs)
		}
	}
	if x, y := InstanceID("t", long), InstanceID("t", long[:62]+"b"); x == y {
		t.Errorf("two names that differ after the part kept got one id %q", x)
	}
}

func TestOwnerOf(t *testing.T) {
	vals := map[string]any{
		"instance": map[string]any{
			"metadata": map[string]any{"namespace": "team-a", "name": "db", "uid": "uid-i"},
			"status": map[string]any{"resources": []any{
				map[string]any{"apiVersion": "v1", "kind": "Namespace", "name": "sf-db"},
			}},
		},
		"binding": map[string]any{
			"metadata": map[string]any{"namespace": "team-a", "name": "b1", "uid": "uid-b"},
			"status": map[string]any{"resources": []any{
				map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "t", "namespace": "sfb-x"},
			}},
		},
	}
	o := ownerOf(vals)
	if o.InstanceUID != "uid-i" || o.InstanceID != InstanceID("team-a", "db") || o.LegacyInstanceID != "db" ||
		o.BindingUID != "uid-b" || o.BindingID != "b1" || o.LegacyBindingID != "b1" {
		t.Errorf("ownerOf = %+v", o)
	}
	want := []osbv1alpha1.Source{{APIVersion: "v1", Kind: "Namespace", Name: "sf-db"}, {APIVersion: "v1", Kind: "Secret", Name: "t", Namespace: "sfb-x"}}
	if len(o.Recorded) != 2 || o.Recorded[0] != want[0] || o.Recorded[1] != want[1] {
		t.Errorf("ownerOf recorded %+v, want %+v", o.Recorded, want)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestIdOf(t *testing.T) {
	inst := func(status osbv1alpha1.SFServiceInstanceStatus) *osbv1alpha1.SFServiceInstance {
		i := &osbv1alpha1.SFServiceInstance{Status: status}
		i.Namespace, i.Name = "team-a", "db"
		return i
	}
	tests := map[string]struct {
		reason string
		inst   *osbv1alpha1.SFServiceInstance
		want   string
	}{
		"New":      {reason: "A new instance gets InstanceID.", inst: inst(osbv1alpha1.SFServiceInstanceStatus{}), want: InstanceID("team-a", "db")},
		"Recorded": {reason: "A recorded id stays, whatever else changes.", inst: inst(osbv1alpha1.SFServiceInstanceStatus{InstanceID: "x", AppliedSpec: &osbv1alpha1.SFServiceInstanceSpec{}}), want: "x"},
		"Earlier":  {reason: "An instance an earlier version provisioned keeps its name, after which that version's templates named its namespaces.", inst: inst(osbv1alpha1.SFServiceInstanceStatus{AppliedSpec: &osbv1alpha1.SFServiceInstanceSpec{}}), want: "db"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := idOf(tc.inst); got != tc.want {
				t.Errorf("%s\nidOf() = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}
