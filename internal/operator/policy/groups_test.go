package policy_test

import (
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/internal/operator/policy"
)

func TestReserved(t *testing.T) {
	cases := map[string]struct {
		reason string
		group  string
		want   bool
	}{
		"Core":                  {"The core group holds Secrets, ServiceAccounts, Namespaces.", "", true},
		"Wildcard":              {"'*' would mean every group in an RBAC rule.", "*", true},
		"BuiltInNoDot":          {"Built-in groups such as apps have no dot.", "apps", true},
		"K8sIO":                 {"Built-in groups end in .k8s.io.", "rbac.authorization.k8s.io", true},
		"K8sIOItself":           {"The domain itself is reserved too.", "k8s.io", true},
		"KubernetesIO":          {"Kubernetes' own extensions.", "metrics.kubernetes.io", true},
		"OpenMCP":               {"The provider kinds live in openmcp.cloud.", "openmcp.cloud", true},
		"OpenMCPClusters":       {"The cluster APIs of the platform.", "clusters.openmcp.cloud", true},
		"OpenMCPCore":           {"The MCP API of the platform.", "core.openmcp.cloud", true},
		"ServicesDomain":        {"services.openmcp.cloud itself belongs to nobody.", "services.openmcp.cloud", true},
		"ServiceGroup":          {"Providers' groups are subdomains of services.openmcp.cloud.", "velero.services.openmcp.cloud", false},
		"DeepServiceGroup":      {"Deeper subdomains are providers' groups as well.", "a.b.services.openmcp.cloud", false},
		"InterOperatorConfig":   {"The inter-operator's config group is a provider group; ownership, not reservation, protects it.", "interoperator.services.openmcp.cloud", false},
		"ServicesLookalike":     {"A suffix match needs the dot: xservices.openmcp.cloud is a platform group.", "xservices.openmcp.cloud", true},
		"OpenControlPlane":      {"The new openMCP domain.", "clusters.open-control-plane.io", true},
		"OpenControlPlaneSvc":   {"Its services subdomain is for providers.", "foo.services.open-control-plane.io", false},
		"ServiceFabrik":         {"The SF groups are the inter-operator's.", "osb.servicefabrik.io", true},
		"ServiceFabrikResource": {"The SF groups are the inter-operator's.", "resource.servicefabrik.io", true},
		"Marketplane":           {"Marketplane's own groups.", "marketplane.io", true},
		"MarketplaneSub":        {"Marketplane's own groups.", "x.marketplane.io", true},
		"UpperCase":             {"Matching ignores case, so that no spelling slips through.", "OSB.ServiceFabrik.IO", true},
		"ThirdParty":            {"Any other domain is a provider's to claim.", "example.com", false},
		"SuffixLookalike":       {"notk8s.io is not k8s.io.", "notk8s.io", false},
	}
	// The admission policy decides with ReservedCEL; it must agree.
	env, err := cel.NewEnv(cel.Variable("g", cel.StringType), ext.Strings())
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(policy.ReservedCEL("g"))
	if iss.Err() != nil {
		t.Fatalf("compile ReservedCEL: %v", iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := policy.Reserved(tc.group); got != tc.want {
				t.Errorf("%s\nReserved(%q) = %v, want %v", tc.reason, tc.group, got, tc.want)
			}
			out, _, err := prg.Eval(map[string]any{"g": tc.group})
			if err != nil {
				t.Fatalf("evaluate ReservedCEL for %q: %v", tc.group, err)
			}
			if got, ok := out.Value().(bool); !ok || got != tc.want {
				t.Errorf("%s\nReservedCEL(%q) = %v, want %v", tc.reason, tc.group, out.Value(), tc.want)
			}
		})
	}
}

func gvk(group, kind string) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: kind}
}

// at returns a creationTimestamp minutes after a fixed instant.
func at(minutes int) metav1.Time {
	return metav1.NewTime(time.Date(2025, 1, 1, 0, minutes, 0, 0, time.UTC))
}

// ownership is what the tests compare: the owned groups, accepted kinds
// and the reasons of the rejections (by group) of one provider.
type ownership struct {
	Groups   []string
	Kinds    []metav1.GroupVersionKind
	Rejected map[string]string
}

func ownershipOf(o *policy.Ownership, kind, name string) ownership {
	got := ownership{Groups: o.Groups(kind, name), Kinds: o.Kinds(kind, name)}
	for _, r := range o.Rejected(kind, name) {
		if got.Rejected == nil {
			got.Rejected = map[string]string{}
		}
		got.Rejected[r.Group] = r.Reason
	}
	return got
}

func TestCompute(t *testing.T) {
	const sp, cp, ps = policy.KindServiceProvider, policy.KindClusterProvider, policy.KindPlatformService
	velero := gvk("velero.services.openmcp.cloud", "Velero")
	type key struct{ kind, name string }
	cases := map[string]struct {
		reason    string
		providers []policy.Provider
		want      map[key]ownership
	}{
		"OwnGroup": {
			reason: "A provider owns the unclaimed, unreserved group it registers.",
			providers: []policy.Provider{
				{Kind: sp, Name: "velero", Created: at(0), Resources: []metav1.GroupVersionKind{velero, gvk(velero.Group, "ProviderConfig")}},
			},
			want: map[key]ownership{{sp, "velero"}: {
				Groups: []string{velero.Group},
				Kinds:  []metav1.GroupVersionKind{velero, gvk(velero.Group, "ProviderConfig")},
			}},
		},
		"SecretAttack": {
			reason: "Registering the core group's Secret (issue #10 item 2) and other reserved groups is rejected; the valid entry stays.",
			providers: []policy.Provider{
				{Kind: sp, Name: "evil", Created: at(0), Resources: []metav1.GroupVersionKind{
					{Group: "", Version: "v1", Kind: "Secret"},
					gvk("osb.servicefabrik.io", "SFServiceInstance"),
					gvk("apps", "Deployment"),
					gvk("openmcp.cloud", "ServiceProvider"),
					gvk("evil.services.openmcp.cloud", "Evil"),
				}},
			},
			want: map[key]ownership{{sp, "evil"}: {
				Groups: []string{"evil.services.openmcp.cloud"},
				Kinds:  []metav1.GroupVersionKind{gvk("evil.services.openmcp.cloud", "Evil")},
				Rejected: map[string]string{
					"": policy.ReasonGroupReserved, "osb.servicefabrik.io": policy.ReasonGroupReserved,
					"apps": policy.ReasonGroupReserved, "openmcp.cloud": policy.ReasonGroupReserved,
				},
			}},
		},
		"Wildcard": {
			reason: "'*' is never a group, neither in status nor in spec.",
			providers: []policy.Provider{
				{Kind: sp, Name: "evil", Created: at(0), SpecGroups: []string{"*"}, Resources: []metav1.GroupVersionKind{gvk("*", "Anything")}},
			},
			want: map[key]ownership{{sp, "evil"}: {Rejected: map[string]string{"*": policy.ReasonGroupInvalid}}},
		},
		"FirstRegistrationWins": {
			reason: "The older provider owns a group both register; the newer one is told who owns it, whatever the list order.",
			providers: []policy.Provider{
				{Kind: sp, Name: "a-thief", Created: at(5), Resources: []metav1.GroupVersionKind{velero}},
				{Kind: sp, Name: "velero", Created: at(0), Resources: []metav1.GroupVersionKind{velero}},
			},
			want: map[key]ownership{
				{sp, "velero"}:  {Groups: []string{velero.Group}, Kinds: []metav1.GroupVersionKind{velero}},
				{sp, "a-thief"}: {Rejected: map[string]string{velero.Group: policy.ReasonGroupNotOwned}},
			},
		},
		"RecordedRegistrationStays": {
			reason: "A group the operator recorded as the younger provider's stays its own while it registers it: an older provider registering it later takes nothing (issue #32).",
			providers: []policy.Provider{
				{Kind: sp, Name: "a-thief", Created: at(0), Resources: []metav1.GroupVersionKind{velero}},
				{Kind: sp, Name: "velero", Created: at(5), Resources: []metav1.GroupVersionKind{velero}, Recorded: []string{velero.Group}},
			},
			want: map[key]ownership{
				{sp, "velero"}:  {Groups: []string{velero.Group}, Kinds: []metav1.GroupVersionKind{velero}},
				{sp, "a-thief"}: {Rejected: map[string]string{velero.Group: policy.ReasonGroupNotOwned}},
			},
		},
		"RecordedButLetGo": {
			reason: "A recorded group its owner no longer registers is free: the oldest registrant has it.",
			providers: []policy.Provider{
				{Kind: sp, Name: "a-next", Created: at(0), Resources: []metav1.GroupVersionKind{velero}},
				{Kind: sp, Name: "velero", Created: at(5), Recorded: []string{velero.Group}},
			},
			want: map[key]ownership{
				{sp, "a-next"}: {Groups: []string{velero.Group}, Kinds: []metav1.GroupVersionKind{velero}},
				{sp, "velero"}: {},
			},
		},
		"RecordedNeverReserved": {
			reason: "A recorded reserved group gives nothing: only the spec grants reserved groups.",
			providers: []policy.Provider{
				{Kind: sp, Name: "evil", Created: at(0), Resources: []metav1.GroupVersionKind{gvk("osb.servicefabrik.io", "SFServiceInstance")}, Recorded: []string{"osb.servicefabrik.io"}},
			},
			want: map[key]ownership{{sp, "evil"}: {Rejected: map[string]string{"osb.servicefabrik.io": policy.ReasonGroupReserved}}},
		},
		"SpecBeatsRecorded": {
			reason: "The platform operator's spec.accessPolicy.apiGroups wins over a recorded registration.",
			providers: []policy.Provider{
				{Kind: sp, Name: "velero", Created: at(0), Resources: []metav1.GroupVersionKind{velero}, Recorded: []string{velero.Group}},
				{Kind: sp, Name: "granted", Created: at(5), SpecGroups: []string{velero.Group}},
			},
			want: map[key]ownership{
				{sp, "granted"}: {Groups: []string{velero.Group}},
				{sp, "velero"}:  {Rejected: map[string]string{velero.Group: policy.ReasonGroupNotOwned}},
			},
		},
		"NameBreaksTie": {
			reason: "With the same creationTimestamp, the name decides.",
			providers: []policy.Provider{
				{Kind: sp, Name: "b", Created: at(0), Resources: []metav1.GroupVersionKind{velero}},
				{Kind: sp, Name: "a", Created: at(0), Resources: []metav1.GroupVersionKind{velero}},
			},
			want: map[key]ownership{
				{sp, "a"}: {Groups: []string{velero.Group}, Kinds: []metav1.GroupVersionKind{velero}},
				{sp, "b"}: {Rejected: map[string]string{velero.Group: policy.ReasonGroupNotOwned}},
			},
		},
		"SpecBeatsRegistration": {
			reason: "The platform operator's spec.accessPolicy.apiGroups wins over an older registration.",
			providers: []policy.Provider{
				{Kind: sp, Name: "squatter", Created: at(0), Resources: []metav1.GroupVersionKind{velero}},
				{Kind: sp, Name: "velero", Created: at(5), SpecGroups: []string{velero.Group}, Resources: []metav1.GroupVersionKind{velero}},
			},
			want: map[key]ownership{
				{sp, "velero"}:   {Groups: []string{velero.Group}, Kinds: []metav1.GroupVersionKind{velero}},
				{sp, "squatter"}: {Rejected: map[string]string{velero.Group: policy.ReasonGroupNotOwned}},
			},
		},
		"SpecGrantsReserved": {
			reason: "The inter-operator owns the SF groups because the platform operator lists them; its config group it owns by registration.",
			providers: []policy.Provider{
				{Kind: sp, Name: "interoperator", Created: at(0),
					SpecGroups: []string{"osb.servicefabrik.io", "resource.servicefabrik.io"},
					Resources:  []metav1.GroupVersionKind{gvk("osb.servicefabrik.io", "SFServiceInstance"), gvk("interoperator.services.openmcp.cloud", "ProviderConfig")}},
				{Kind: sp, Name: "evil", Created: at(1), Resources: []metav1.GroupVersionKind{gvk("interoperator.services.openmcp.cloud", "ProviderConfig"), gvk("resource.servicefabrik.io", "SFPlan")}},
			},
			want: map[key]ownership{
				{sp, "interoperator"}: {
					Groups: []string{"interoperator.services.openmcp.cloud", "osb.servicefabrik.io", "resource.servicefabrik.io"},
					Kinds:  []metav1.GroupVersionKind{gvk("osb.servicefabrik.io", "SFServiceInstance"), gvk("interoperator.services.openmcp.cloud", "ProviderConfig")},
				},
				{sp, "evil"}: {Rejected: map[string]string{
					"interoperator.services.openmcp.cloud": policy.ReasonGroupNotOwned,
					"resource.servicefabrik.io":            policy.ReasonGroupNotOwned,
				}},
			},
		},
		"SpecConflict": {
			reason: "Two providers listing one group in spec: neither owns it, both are told.",
			providers: []policy.Provider{
				{Kind: sp, Name: "a", Created: at(0), SpecGroups: []string{velero.Group}, Resources: []metav1.GroupVersionKind{velero}},
				{Kind: cp, Name: "b", Created: at(1), SpecGroups: []string{velero.Group}},
				{Kind: sp, Name: "c", Created: at(2), Resources: []metav1.GroupVersionKind{velero}},
			},
			want: map[key]ownership{
				{sp, "a"}: {Rejected: map[string]string{velero.Group: policy.ReasonGroupConflict}},
				{cp, "b"}: {Rejected: map[string]string{velero.Group: policy.ReasonGroupConflict}},
				{sp, "c"}: {Rejected: map[string]string{velero.Group: policy.ReasonGroupConflict}},
			},
		},
		"OtherKinds": {
			reason: "ClusterProviders and PlatformServices own what their spec lists; they have no status.resources.",
			providers: []policy.Provider{
				{Kind: ps, Name: "audit", Created: at(0), SpecGroups: []string{"audit.example.com", ""}},
			},
			want: map[key]ownership{{ps, "audit"}: {Groups: []string{"", "audit.example.com"}}},
		},
		"MissingKind": {
			reason: "An entry without kind or version is refused.",
			providers: []policy.Provider{
				{Kind: sp, Name: "x", Created: at(0), Resources: []metav1.GroupVersionKind{{Group: "x.example.com", Version: "v1"}}},
			},
			want: map[key]ownership{{sp, "x"}: {Rejected: map[string]string{"x.example.com": policy.ReasonGroupInvalid}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := policy.Compute(tc.providers)
			for k, want := range tc.want {
				if diff := cmp.Diff(want, ownershipOf(o, k.kind, k.name)); diff != "" {
					t.Errorf("%s\n%s %s: -want +got:\n%s", tc.reason, k.kind, k.name, diff)
				}
			}
		})
	}
}

func TestMayOwn(t *testing.T) {
	const sp = policy.KindServiceProvider
	o := policy.Compute([]policy.Provider{
		{Kind: sp, Name: "velero", Created: at(0), Resources: []metav1.GroupVersionKind{gvk("velero.services.openmcp.cloud", "Velero")}},
		{Kind: sp, Name: "interoperator", Created: at(0), SpecGroups: []string{"osb.servicefabrik.io"}},
		{Kind: sp, Name: "a", Created: at(0), SpecGroups: []string{"both.example.com"}},
		{Kind: policy.KindClusterProvider, Name: "b", Created: at(0), SpecGroups: []string{"both.example.com"}},
	})
	cases := map[string]struct {
		reason     string
		kind, name string
		group      string
		want       bool
	}{
		"Owned":            {"A provider may own what it owns.", sp, "velero", "velero.services.openmcp.cloud", true},
		"OwnedByOther":     {"Another provider's group is not claimable.", sp, "evil", "velero.services.openmcp.cloud", false},
		"Unclaimed":        {"An unclaimed, unreserved group can still be claimed (before init registers it).", sp, "new", "new.services.openmcp.cloud", true},
		"Reserved":         {"A reserved group needs the spec.", sp, "new", "resource.servicefabrik.io", false},
		"ReservedGranted":  {"A reserved group listed in the spec is owned.", sp, "interoperator", "osb.servicefabrik.io", true},
		"ReservedOther":    {"A reserved group granted to another provider is not.", sp, "evil", "osb.servicefabrik.io", false},
		"Conflict":         {"A group in conflict belongs to nobody, not even its claimants.", sp, "a", "both.example.com", false},
		"ConflictOutsider": {"Nor can an outsider claim it.", sp, "x", "both.example.com", false},
		"Wildcard":         {"'*' is never owned.", sp, "x", "*", false},
		"Core":             {"The core group is reserved.", sp, "x", "", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := o.MayOwn(tc.kind, tc.name, tc.group); got != tc.want {
				t.Errorf("%s\nMayOwn(%s, %s, %q) = %v, want %v", tc.reason, tc.kind, tc.name, tc.group, got, tc.want)
			}
		})
	}
}

func TestRejectionMessageNamesKindAndGroup(t *testing.T) {
	o := policy.Compute([]policy.Provider{{Kind: policy.KindServiceProvider, Name: "evil", Resources: []metav1.GroupVersionKind{{Version: "v1", Kind: "Secret"}}}})
	r := o.Rejected(policy.KindServiceProvider, "evil")
	if len(r) != 1 {
		t.Fatalf("want one rejection of the Secret entry, got %+v", r)
	}
	if want := `status.resources entry v1, Kind=Secret (API group "") is reserved; only the platform operator can grant it in spec.accessPolicy.apiGroups`; r[0].Message != want {
		t.Errorf("message: got %q, want %q", r[0].Message, want)
	}
}

func TestOwnersAndProviders(t *testing.T) {
	const sp, cp = policy.KindServiceProvider, policy.KindClusterProvider
	o := policy.Compute([]policy.Provider{
		{Kind: sp, Name: "velero", Created: at(0), Resources: []metav1.GroupVersionKind{gvk("velero.services.openmcp.cloud", "Velero")}},
		{Kind: sp, Name: "a", Created: at(0), SpecGroups: []string{"both.example.com"}},
		{Kind: cp, Name: "b", Created: at(0), SpecGroups: []string{"both.example.com", "osb.servicefabrik.io"}},
	})
	want := map[string]policy.Owner{
		"velero.services.openmcp.cloud": {Kind: sp, Name: "velero"},
		"both.example.com":              {},
		"osb.servicefabrik.io":          {Kind: cp, Name: "b"},
	}
	if diff := cmp.Diff(want, o.Owners()); diff != "" {
		t.Errorf("Owners (a group in conflict maps to the zero Owner, which the admission policy's ConfigMap turns into nobody): -want +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "velero"}, o.Providers(sp)); diff != "" {
		t.Errorf("Providers(ServiceProvider): -want +got:\n%s", diff)
	}
}
