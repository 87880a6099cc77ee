package crds_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/pkg/manifests"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/crds"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// openMCPGroups are the API groups whose CRDs this file tests.
var openMCPGroups = []string{"openmcp.cloud", "clusters.openmcp.cloud", "core.openmcp.cloud"}

// Namespaces the namespaced fixtures live in.
var omcpNamespaces = []string{"clusters", "tenant-a"}

// omcpCRDFacts is what an operator relies on when typing kubectl commands and
// what a CRD manager relies on when routing CRDs to clusters.
type omcpCRDFacts struct {
	Plural     string
	Scope      apiextensionsv1.ResourceScope
	ShortNames []string
	Cluster    string
	Status     bool
	Columns    []string
}

func TestOpenMCPCRDs(t *testing.T) {
	cases := map[string]struct {
		reason string
		want   omcpCRDFacts
	}{
		"ServiceProvider": {
			reason: "providers are cluster-scoped platform objects; the column shows the image operators look for",
			want: omcpCRDFacts{Plural: "serviceproviders", Scope: apiextensionsv1.ClusterScoped, ShortNames: []string{"sp"},
				Cluster: crds.ClusterPlatform, Status: true, Columns: []string{"Image", "Phase", "Ready", "Replicas", "Age"}},
		},
		"ClusterProvider": {
			reason: "providers are cluster-scoped platform objects",
			want: omcpCRDFacts{Plural: "clusterproviders", Scope: apiextensionsv1.ClusterScoped, ShortNames: []string{"cp"},
				Cluster: crds.ClusterPlatform, Status: true, Columns: []string{"Image", "Phase", "Ready", "Replicas", "Age"}},
		},
		"PlatformService": {
			reason: "providers are cluster-scoped platform objects",
			want: omcpCRDFacts{Plural: "platformservices", Scope: apiextensionsv1.ClusterScoped, ShortNames: []string{"ps"},
				Cluster: crds.ClusterPlatform, Status: true, Columns: []string{"Image", "Phase", "Ready", "Replicas", "Age"}},
		},
		"Cluster": {
			reason: "Clusters are namespaced in openMCP",
			want: omcpCRDFacts{Plural: "clusters", Scope: apiextensionsv1.NamespaceScoped, ShortNames: []string{"cl"},
				Cluster: crds.ClusterPlatform, Status: true,
				Columns: []string{"Profile", "Purposes", "Tenancy", "Phase", "Ready", "Version", "Provider", "Info", "Age"}},
		},
		"ClusterProfile": {
			reason: "ClusterProfiles are cluster-scoped and have no status, as in openMCP",
			want: omcpCRDFacts{Plural: "clusterprofiles", Scope: apiextensionsv1.ClusterScoped, ShortNames: []string{"cprof", "profile"},
				Cluster: crds.ClusterPlatform, Columns: []string{"Provider", "Config", "Versions", "Age"}},
		},
		"ClusterRequest": {
			reason: "ClusterRequests are namespaced and keep openMCP's short names",
			want: omcpCRDFacts{Plural: "clusterrequests", Scope: apiextensionsv1.NamespaceScoped, ShortNames: []string{"cr", "creq"},
				Cluster: crds.ClusterPlatform, Status: true, Columns: []string{"Purpose", "Phase", "Ready", "Cluster", "Cluster-NS", "Age"}},
		},
		"AccessRequest": {
			reason: "AccessRequests are namespaced and keep openMCP's short names",
			want: omcpCRDFacts{Plural: "accessrequests", Scope: apiextensionsv1.NamespaceScoped, ShortNames: []string{"ar", "areq"},
				Cluster: crds.ClusterPlatform, Status: true, Columns: []string{"Cluster", "Request", "Phase", "Ready", "Secret", "Provider", "Age"}},
		},
		"ManagedControlPlane": {
			reason: "ManagedControlPlanes are the tenants' objects and the only kind here installed on the onboarding cluster",
			want: omcpCRDFacts{Plural: "managedcontrolplanes", Scope: apiextensionsv1.NamespaceScoped, ShortNames: []string{"mcp"},
				Cluster: crds.ClusterOnboarding, Status: true, Columns: []string{"Phase", "Ready", "Kubeconfig", "Age"}},
		},
	}

	all, err := crds.All()
	if err != nil {
		t.Fatalf("crds.All(): %v", err)
	}
	byKind := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range all {
		if slices.Contains(openMCPGroups, crd.Spec.Group) {
			byKind[crd.Spec.Names.Kind] = crd
		}
	}
	for kind := range byKind {
		if _, ok := cases[kind]; !ok {
			t.Errorf("CRD for kind %s has no case in this test", kind)
		}
	}

	for kind, tc := range cases {
		t.Run(kind, func(t *testing.T) {
			crd, ok := byKind[kind]
			if !ok {
				t.Fatalf("%s: no embedded CRD for kind %s", tc.reason, kind)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("want one version, got %d", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			got := omcpCRDFacts{
				Plural:     crd.Spec.Names.Plural,
				Scope:      crd.Spec.Scope,
				ShortNames: crd.Spec.Names.ShortNames,
				Cluster:    crd.Labels[crds.ClusterLabel],
				Status:     v.Subresources != nil && v.Subresources.Status != nil,
			}
			for _, col := range v.AdditionalPrinterColumns {
				got.Columns = append(got.Columns, col.Name)
				if col.Name == "Ready" && col.JSONPath != `.status.conditions[?(@.type=="Ready")].status` {
					t.Errorf("Ready column reads %s, want the Ready condition's status", col.JSONPath)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCRD facts (-want +got):\n%s", tc.reason, diff)
			}

			routed, err := crds.ForCluster(tc.want.Cluster)
			if err != nil {
				t.Fatalf("crds.ForCluster(%q): %v", tc.want.Cluster, err)
			}
			if !slices.ContainsFunc(routed, func(c *apiextensionsv1.CustomResourceDefinition) bool { return c.Name == crd.Name }) {
				t.Errorf("crds.ForCluster(%q) does not include %s", tc.want.Cluster, crd.Name)
			}
		})
	}
}

// TestOpenMCPObjects installs every CRD into a real API server and checks
// that valid openMCP objects are stored unchanged, that defaults are applied
// and that every validation rule rejects what it should, with a message that
// names the problem.
func TestOpenMCPObjects(t *testing.T) {
	c := apiServer(t)
	for _, ns := range omcpNamespaces {
		if err := c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}

	t.Run("ValidObjectsRoundTrip", func(t *testing.T) { testOMCPRoundTrip(t, c) })
	t.Run("InvalidObjectsAreRejected", func(t *testing.T) { testOMCPInvalidCreate(t, c) })
	t.Run("UpdateRules", func(t *testing.T) { testOMCPUpdates(t, c) })
	t.Run("StatusAndPrinterColumns", func(t *testing.T) { testOMCPStatusAndColumns(t, c) })
	t.Run("ShortNamesDoNotClash", func(t *testing.T) { testOMCPShortNames(t, c) })
}

func testOMCPRoundTrip(t *testing.T, c *testenv.Cluster) {
	cases := map[string]struct {
		reason string
		file   string
		// defaults maps a path (dotted, with [i] for list items) to the
		// value the API server must fill in when the fixture leaves the
		// field out.
		defaults map[string]any
	}{
		"ServiceProvider of seed 04": {
			reason: "the provider deployment contract's example applies unchanged and gets the commands and replicas defaulted",
			file:   "serviceprovider.yaml",
			defaults: map[string]any{
				"spec.initCommand": []any{"init"},
				"spec.runCommand":  []any{"run"},
				"spec.runReplicas": int64(1),
			},
		},
		"ClusterProvider with explicit settings": {
			reason: "set fields are kept; only unset ones are defaulted",
			file:   "clusterprovider.yaml",
			defaults: map[string]any{
				"spec.initCommand":      []any{"init"},
				"spec.runCommand":       []any{"run"},
				"spec.metrics.disabled": false,
			},
		},
		"PlatformService with volumes and tracing": {
			reason: "verbosity defaults to INFO, replicas to 1 and tracing to enabled",
			file:   "platformservice.yaml",
			defaults: map[string]any{
				"spec.verbosity":       "INFO",
				"spec.runReplicas":     int64(1),
				"spec.tracing.enabled": true,
			},
		},
		"ClusterProfile": {
			reason: "a cluster-scoped profile keeps its versions",
			file:   "clusterprofile.yaml",
		},
		"Cluster": {
			reason: "a namespaced Cluster keeps its spec",
			file:   "cluster.yaml",
		},
		"ClusterRequest": {
			reason: "a ClusterRequest keeps purpose and waitForClusterDeletion",
			file:   "clusterrequest.yaml",
		},
		"AccessRequest with token access": {
			reason: "permissions, role references and ttl are kept",
			file:   "accessrequest-token.yaml",
		},
		"AccessRequest with OIDC access": {
			reason: "the OIDC provider's claims default to sub and groups",
			file:   "accessrequest-oidc.yaml",
			defaults: map[string]any{
				"spec.oidc.usernameClaim": "sub",
				"spec.oidc.groupsClaim":   "groups",
			},
		},
		"ManagedControlPlane with OIDC and token access": {
			reason: "the latest openMCP control plane spec applies under the kept group and kind; extra providers get the default claims",
			file:   "managedcontrolplane.yaml",
			defaults: map[string]any{
				"spec.iam.oidc.extraProviders[0].usernameClaim": "sub",
				"spec.iam.oidc.extraProviders[0].groupsClaim":   "groups",
			},
		},
	}

	// Every kind must have at least one valid object here.
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[omcpFixture(t, tc.file).GetKind()] = true
	}
	for _, kind := range openMCPKinds(t) {
		if !covered[kind] {
			t.Errorf("kind %s has no valid object in the round-trip cases", kind)
		}
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := omcpFixture(t, tc.file)
			obj := want.DeepCopy()
			if err := c.Client.Create(t.Context(), obj); err != nil {
				t.Fatalf("%s\ncreate %s %s: %v", tc.reason, want.GetKind(), want.GetName(), err)
			}
			got := omcpGet(t, c, want)

			if diffs := testenv.FieldDiffs(want.Object, got.Object); len(diffs) > 0 {
				t.Errorf("%s\nthe API server lost or changed fields:\n  %s", tc.reason, strings.Join(diffs, "\n  "))
			}

			gotDefaults := map[string]any{}
			for path := range tc.defaults {
				gotDefaults[path] = omcpLookup(got.Object, path)
			}
			if diff := cmp.Diff(tc.defaults, gotDefaults, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\ndefaults (-want +got):\n%s", tc.reason, diff)
			}

			// The Go types must carry every field too: decoding the stored
			// object strictly into them and encoding it again loses nothing.
			typed, err := c.Scheme.New(want.GroupVersionKind())
			if err != nil {
				t.Fatalf("the scheme does not know %s: %v", want.GroupVersionKind(), err)
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(got.Object, typed, true); err != nil {
				t.Fatalf("decode the stored %s into its Go type: %v", want.GetKind(), err)
			}
			back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
			if err != nil {
				t.Fatalf("encode %s from its Go type: %v", want.GetKind(), err)
			}
			if diffs := testenv.FieldDiffs(want.Object, back); len(diffs) > 0 {
				t.Errorf("the Go type of %s lost or changed fields:\n  %s", want.GetKind(), strings.Join(diffs, "\n  "))
			}
		})
	}
}

// omcpEdit changes an object before it is sent to the API server.
type omcpEdit func(obj map[string]any) error

// omcpSet sets the field at path to value (JSON types only: string, int64,
// bool, map[string]any, []any).
func omcpSet(value any, path ...string) omcpEdit {
	return func(obj map[string]any) error {
		return unstructured.SetNestedField(obj, runtime.DeepCopyJSONValue(value), path...)
	}
}

// omcpRemove deletes the field at path.
func omcpRemove(path ...string) omcpEdit {
	return func(obj map[string]any) error {
		unstructured.RemoveNestedField(obj, path...)
		return nil
	}
}

// omcpRenameFirstExtraProvider renames the first extra OIDC provider of a
// ManagedControlPlane.
func omcpRenameFirstExtraProvider(name string) omcpEdit {
	return func(obj map[string]any) error {
		providers, found, err := unstructured.NestedSlice(obj, "spec", "iam", "oidc", "extraProviders")
		if err != nil {
			return fmt.Errorf("read the extra providers to rename: %w", err)
		}
		if !found || len(providers) == 0 {
			return errors.New("no extra providers to rename")
		}
		first, ok := providers[0].(map[string]any)
		if !ok {
			return fmt.Errorf("extra provider 0 is %T, not an object", providers[0])
		}
		first["name"] = name
		return unstructured.SetNestedSlice(obj, providers, "spec", "iam", "oidc", "extraProviders")
	}
}

func testOMCPInvalidCreate(t *testing.T, c *testenv.Cluster) {
	minimalOIDC := map[string]any{
		"name":     "corp",
		"issuer":   "https://id.example.com",
		"clientID": "marketplane",
		"roleBindings": []any{map[string]any{
			"subjects": []any{map[string]any{"kind": "User", "name": "alice"}},
			"roleRefs": []any{map[string]any{"kind": "ClusterRole", "name": "view"}},
		}},
	}
	cases := map[string]struct {
		reason string
		file   string
		edits  []omcpEdit
		want   []string
	}{
		"ServiceProvider with verbosity LOUD": {
			reason: "verbosity is an enum of DEBUG, INFO and ERROR",
			file:   "serviceprovider.yaml",
			edits:  []omcpEdit{omcpSet("LOUD", "spec", "verbosity")},
			want:   []string{`spec.verbosity: Unsupported value: "LOUD"`},
		},
		"ServiceProvider with runReplicas 0": {
			reason: "a provider runs at least one replica",
			file:   "serviceprovider.yaml",
			edits:  []omcpEdit{omcpSet(int64(0), "spec", "runReplicas")},
			want:   []string{"spec.runReplicas", "should be greater than or equal to 1"},
		},
		"ServiceProvider without image": {
			reason: "the image is required",
			file:   "serviceprovider.yaml",
			edits:  []omcpEdit{omcpRemove("spec", "image")},
			want:   []string{"spec.image: Required value"},
		},
		"ServiceProvider with an empty image": {
			reason: "an empty image name cannot be pulled",
			file:   "serviceprovider.yaml",
			edits:  []omcpEdit{omcpSet("", "spec", "image")},
			want:   []string{"spec.image", "at least 1 chars long"},
		},
		"ServiceProvider without spec": {
			reason: "a provider object without spec says nothing to deploy",
			file:   "serviceprovider.yaml",
			edits:  []omcpEdit{omcpRemove("spec")},
			want:   []string{"spec: Required value"},
		},
		"ClusterProvider with two env vars of one name": {
			reason: "env is a map keyed by name",
			file:   "clusterprovider.yaml",
			edits: []omcpEdit{omcpSet([]any{
				map[string]any{"name": "A", "value": "1"},
				map[string]any{"name": "A", "value": "2"},
			}, "spec", "env")},
			want: []string{"spec.env[1]", "Duplicate value"},
		},
		"ClusterProvider with metrics port 0": {
			reason: "a metrics port is a TCP port",
			file:   "clusterprovider.yaml",
			edits:  []omcpEdit{omcpSet(int64(0), "spec", "metrics", "port")},
			want:   []string{"spec.metrics.port", "should be greater than or equal to 1"},
		},
		"PlatformService with verbosity LOUD": {
			reason: "the enum applies to every provider kind",
			file:   "platformservice.yaml",
			edits:  []omcpEdit{omcpSet("LOUD", "spec", "verbosity")},
			want:   []string{`spec.verbosity: Unsupported value: "LOUD"`},
		},
		"Cluster with tenancy Private": {
			reason: "tenancy is Exclusive or Shared",
			file:   "cluster.yaml",
			edits:  []omcpEdit{omcpSet("Private", "spec", "tenancy")},
			want:   []string{`spec.tenancy: Unsupported value: "Private"`},
		},
		"Cluster without profile": {
			reason: "the profile decides which provider creates the cluster",
			file:   "cluster.yaml",
			edits:  []omcpEdit{omcpRemove("spec", "profile")},
			want:   []string{"spec.profile: Required value"},
		},
		"Cluster with an empty purpose list": {
			reason: "a cluster serves at least one purpose",
			file:   "cluster.yaml",
			edits:  []omcpEdit{omcpSet([]any{}, "spec", "purposes")},
			want:   []string{"spec.purposes", "should have at least 1 items"},
		},
		"ClusterProfile with a version listed twice": {
			reason: "supported versions are keyed by version",
			file:   "clusterprofile.yaml",
			edits: []omcpEdit{omcpSet([]any{
				map[string]any{"version": "1.36.3"},
				map[string]any{"version": "1.36.3", "deprecated": true},
			}, "spec", "supportedVersions")},
			want: []string{"spec.supportedVersions[1]", "Duplicate value"},
		},
		"ClusterRequest without purpose": {
			reason: "the scheduler needs a purpose",
			file:   "clusterrequest.yaml",
			edits:  []omcpEdit{omcpRemove("spec", "purpose")},
			want:   []string{"spec.purpose: Required value"},
		},
		"AccessRequest with clusterRef and requestRef": {
			reason: "an AccessRequest targets one cluster, named one way",
			file:   "accessrequest-token.yaml",
			edits:  []omcpEdit{omcpSet(map[string]any{"name": "mcp-request", "namespace": "clusters"}, "spec", "requestRef")},
			want:   []string{"exactly one of spec.clusterRef or spec.requestRef must be set"},
		},
		"AccessRequest with neither clusterRef nor requestRef": {
			reason: "an AccessRequest must say which cluster it is for",
			file:   "accessrequest-token.yaml",
			edits:  []omcpEdit{omcpRemove("spec", "clusterRef")},
			want:   []string{"exactly one of spec.clusterRef or spec.requestRef must be set"},
		},
		"AccessRequest with token and oidc": {
			reason: "access is either token-based or OIDC-based",
			file:   "accessrequest-token.yaml",
			edits:  []omcpEdit{omcpSet(minimalOIDC, "spec", "oidc")},
			want:   []string{"exactly one of spec.token or spec.oidc must be set"},
		},
		"AccessRequest with neither token nor oidc": {
			reason: "an AccessRequest must say what kind of access it wants",
			file:   "accessrequest-token.yaml",
			edits:  []omcpEdit{omcpRemove("spec", "token")},
			want:   []string{"exactly one of spec.token or spec.oidc must be set"},
		},
		"AccessRequest binding a Role without namespace": {
			reason: "a Role lives in a namespace",
			file:   "accessrequest-token.yaml",
			edits:  []omcpEdit{omcpSet([]any{map[string]any{"kind": "Role", "name": "leader-election"}}, "spec", "token", "roleRefs")},
			want:   []string{"namespace must be set when kind is Role"},
		},
		"AccessRequest binding a ClusterRole with namespace": {
			reason: "a ClusterRole has no namespace",
			file:   "accessrequest-token.yaml",
			edits:  []omcpEdit{omcpSet([]any{map[string]any{"kind": "ClusterRole", "name": "view", "namespace": "velero"}}, "spec", "token", "roleRefs")},
			want:   []string{"namespace must not be set when kind is ClusterRole"},
		},
		"AccessRequest binding a role of kind Group": {
			reason: "role references name Roles or ClusterRoles",
			file:   "accessrequest-token.yaml",
			edits:  []omcpEdit{omcpSet([]any{map[string]any{"kind": "Group", "name": "view"}}, "spec", "token", "roleRefs")},
			want:   []string{`Unsupported value: "Group"`},
		},
		"AccessRequest with an OIDC provider named system": {
			reason: "'system' would put the provider's users next to Kubernetes' own",
			file:   "accessrequest-oidc.yaml",
			edits:  []omcpEdit{omcpSet("system", "spec", "oidc", "name")},
			want:   []string{"'system' is reserved and cannot be used as an OIDC provider name"},
		},
		"AccessRequest with an issuer that is not a URL": {
			reason: "the issuer is an http(s) URL",
			file:   "accessrequest-oidc.yaml",
			edits:  []omcpEdit{omcpSet("corp", "spec", "oidc", "issuer")},
			want:   []string{"spec.oidc.issuer", "should match"},
		},
		"ManagedControlPlane with an extra provider named default": {
			reason: "'default' is the status.access key of the standard provider",
			file:   "managedcontrolplane.yaml",
			edits:  []omcpEdit{omcpRenameFirstExtraProvider("default")},
			want:   []string{"'default' is reserved for the standard OIDC provider and cannot name an extra provider"},
		},
		"ManagedControlPlane with two tokens of one name": {
			reason: "token names key the kubeconfig Secrets",
			file:   "managedcontrolplane.yaml",
			edits: []omcpEdit{omcpSet([]any{
				map[string]any{"name": "admin", "roleRefs": []any{map[string]any{"kind": "ClusterRole", "name": "cluster-admin"}}},
				map[string]any{"name": "admin", "roleRefs": []any{map[string]any{"kind": "ClusterRole", "name": "view"}}},
			}, "spec", "iam", "tokens")},
			want: []string{"spec.iam.tokens[1]", "Duplicate value"},
		},
		"ManagedControlPlane without iam": {
			reason: "iam is required, as in openMCP",
			file:   "managedcontrolplane.yaml",
			edits:  []omcpEdit{omcpRemove("spec", "iam")},
			want:   []string{"spec.iam: Required value"},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obj := omcpFixture(t, tc.file)
			obj.SetName(omcpObjectName(name))
			omcpApplyEdits(t, obj, tc.edits)
			err := c.Client.Create(t.Context(), obj)
			omcpCheckRejected(t, tc.reason, err, tc.want)
		})
	}
}

func testOMCPUpdates(t *testing.T, c *testenv.Cluster) {
	grantedStatus := map[string]any{
		"phase":   clustersv1alpha1.RequestGranted,
		"cluster": map[string]any{"name": "mcp-a1b2c3", "namespace": "clusters"},
	}
	cases := map[string]struct {
		reason string
		file   string
		// status, when set, is written through the status subresource after
		// the object is created and before the edits.
		status map[string]any
		edits  []omcpEdit
		// viaStatus sends the edited object to the status subresource.
		viaStatus bool
		// want lists parts of the rejection message; empty means the
		// update must be accepted.
		want []string
	}{
		"ClusterRequest purpose cannot change": {
			reason: "ClusterRequest.spec is immutable",
			file:   "clusterrequest.yaml",
			edits:  []omcpEdit{omcpSet("workload", "spec", "purpose")},
			want:   []string{"spec is immutable"},
		},
		"ClusterRequest waitForClusterDeletion cannot change": {
			reason: "ClusterRequest.spec is immutable, optional fields included",
			file:   "clusterrequest.yaml",
			edits:  []omcpEdit{omcpSet(false, "spec", "waitForClusterDeletion")},
			want:   []string{"spec is immutable"},
		},
		"ClusterRequest labels can change": {
			reason: "only the spec is immutable, not the metadata",
			file:   "clusterrequest.yaml",
			edits:  []omcpEdit{omcpSet(map[string]any{"team": "a"}, "metadata", "labels")},
		},
		"ClusterRequest status.cluster can be set": {
			reason:    "the scheduler records the granted cluster once",
			file:      "clusterrequest.yaml",
			edits:     []omcpEdit{omcpSet(grantedStatus, "status")},
			viaStatus: true,
		},
		"ClusterRequest status.cluster cannot change": {
			reason:    "a granted request keeps its cluster",
			file:      "clusterrequest.yaml",
			status:    grantedStatus,
			edits:     []omcpEdit{omcpSet("other-cluster", "status", "cluster", "name")},
			viaStatus: true,
			want:      []string{"status.cluster is immutable once set"},
		},
		"ClusterRequest status.cluster cannot be removed": {
			reason:    "a granted request keeps its cluster",
			file:      "clusterrequest.yaml",
			status:    grantedStatus,
			edits:     []omcpEdit{omcpRemove("status", "cluster")},
			viaStatus: true,
			want:      []string{"status.cluster cannot be removed once set"},
		},
		"ClusterRequest status conditions can change while the cluster stays": {
			reason: "only status.cluster is fixed, the rest of the status is not",
			file:   "clusterrequest.yaml",
			status: grantedStatus,
			edits: []omcpEdit{omcpSet([]any{map[string]any{
				"type": "Ready", "status": "True", "reason": "Granted", "message": "cluster assigned",
				"lastTransitionTime": "2026-01-02T03:04:05Z",
			}}, "status", "conditions")},
			viaStatus: true,
		},
		"Cluster profile cannot change": {
			reason: "Cluster.spec.profile is immutable",
			file:   "cluster.yaml",
			edits:  []omcpEdit{omcpSet("gardener", "spec", "profile")},
			want:   []string{"profile is immutable"},
		},
		"Cluster purposes can change": {
			reason: "only the profile of a Cluster is immutable",
			file:   "cluster.yaml",
			edits:  []omcpEdit{omcpSet([]any{"mcp", "workload"}, "spec", "purposes")},
		},
		"AccessRequest clusterRef cannot change": {
			reason: "the target of an AccessRequest is immutable",
			file:   "accessrequest-token.yaml",
			edits:  []omcpEdit{omcpSet("other-cluster", "spec", "clusterRef", "name")},
			want:   []string{"spec.clusterRef is immutable"},
		},
		"AccessRequest requestRef cannot change": {
			reason: "the target of an AccessRequest is immutable",
			file:   "accessrequest-oidc.yaml",
			edits:  []omcpEdit{omcpSet("other-namespace", "spec", "requestRef", "namespace")},
			want:   []string{"spec.requestRef is immutable"},
		},
		"AccessRequest clusterRef cannot be swapped for a requestRef": {
			reason: "the target of an AccessRequest is immutable, also in how it is named",
			file:   "accessrequest-token.yaml",
			edits: []omcpEdit{
				omcpRemove("spec", "clusterRef"),
				omcpSet(map[string]any{"name": "mcp-request", "namespace": "clusters"}, "spec", "requestRef"),
			},
			want: []string{"spec.clusterRef cannot be removed once set"},
		},
		"AccessRequest requestRef cannot be removed": {
			reason: "the target of an AccessRequest is immutable",
			file:   "accessrequest-oidc.yaml",
			edits:  []omcpEdit{omcpRemove("spec", "requestRef")},
			want:   []string{"spec.requestRef cannot be removed once set"},
		},
		"AccessRequest cannot gain oidc next to token": {
			reason: "the one-of rule holds on update too",
			file:   "accessrequest-token.yaml",
			edits: []omcpEdit{omcpSet(map[string]any{
				"name": "corp", "issuer": "https://id.example.com", "clientID": "marketplane",
				"roleBindings": []any{},
			}, "spec", "oidc")},
			want: []string{"exactly one of spec.token or spec.oidc must be set"},
		},
		"AccessRequest permissions can change": {
			reason: "what access is requested may change; where it is requested may not",
			file:   "accessrequest-token.yaml",
			edits: []omcpEdit{omcpSet([]any{map[string]any{
				"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get"}}},
			}}, "spec", "token", "permissions")},
		},
		"ServiceProvider image can change": {
			reason: "a new image is how a provider is upgraded",
			file:   "serviceprovider.yaml",
			edits:  []omcpEdit{omcpSet("ghcr.io/openmcp-project/images/service-provider-example:v1.1.0", "spec", "image")},
		},
		"ServiceProvider verbosity cannot become LOUD": {
			reason: "the enum holds on update too",
			file:   "serviceprovider.yaml",
			edits:  []omcpEdit{omcpSet("LOUD", "spec", "verbosity")},
			want:   []string{`spec.verbosity: Unsupported value: "LOUD"`},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			obj := omcpFixture(t, tc.file)
			obj.SetName(omcpObjectName(name))
			if err := c.Client.Create(ctx, obj); err != nil {
				t.Fatalf("create %s: %v", obj.GetName(), err)
			}
			if tc.status != nil {
				if err := unstructured.SetNestedField(obj.Object, runtime.DeepCopyJSONValue(tc.status), "status"); err != nil {
					t.Fatalf("set status: %v", err)
				}
				if err := c.Client.Status().Update(ctx, obj); err != nil {
					t.Fatalf("write the initial status: %v", err)
				}
			}

			obj = omcpGet(t, c, obj)
			omcpApplyEdits(t, obj, tc.edits)
			var err error
			if tc.viaStatus {
				err = c.Client.Status().Update(ctx, obj)
			} else {
				err = c.Client.Update(ctx, obj)
			}

			if len(tc.want) > 0 {
				omcpCheckRejected(t, tc.reason, err, tc.want)
				return
			}
			if err != nil {
				t.Fatalf("%s\nthe update was rejected: %v", tc.reason, err)
			}
			got := omcpGet(t, c, obj)
			for _, field := range []string{"metadata", "spec", "status"} {
				want, _, _ := unstructured.NestedMap(obj.Object, field)
				have, _, _ := unstructured.NestedMap(got.Object, field)
				delete(want, "resourceVersion")
				delete(want, "generation")
				delete(want, "managedFields")
				if diffs := testenv.FieldDiffs(want, have); len(diffs) > 0 {
					t.Errorf("%s\nthe accepted update was not stored as sent:\n  %s", tc.reason, strings.Join(diffs, "\n  "))
				}
			}
		})
	}
}

func testOMCPStatusAndColumns(t *testing.T, c *testenv.Cluster) {
	ctx := t.Context()
	sp := &providerv1alpha1.ServiceProvider{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(omcpFixture(t, "serviceprovider.yaml").Object, sp, true); err != nil {
		t.Fatalf("decode fixture: %v", err)
	}
	sp.Name = "status-check"
	if err := c.Client.Create(ctx, sp); err != nil {
		t.Fatalf("create ServiceProvider: %v", err)
	}

	// The operator writes the deployment status; the provider registers the
	// kinds it serves. Both live in one status and must survive together.
	since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	sp.Status.ObservedGeneration = sp.Generation
	sp.Status.Phase = providerv1alpha1.PhaseReady
	apimeta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
		Type: string(providerv1alpha1.ConditionInitialized), Status: metav1.ConditionTrue,
		Reason: string(providerv1alpha1.ReasonInitCompleted), Message: "init Job completed", LastTransitionTime: since,
	})
	apimeta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
		Type: string(providerv1alpha1.ConditionReady), Status: metav1.ConditionTrue,
		Reason: string(providerv1alpha1.ReasonProviderReady), Message: "run Deployment is available", LastTransitionTime: since,
	})
	sp.Status.Resources = []metav1.GroupVersionKind{{Group: "velero.services.openmcp.cloud", Version: "v1alpha1", Kind: "Velero"}}
	want := sp.Status.DeepCopy()
	if err := c.Client.Status().Update(ctx, sp); err != nil {
		t.Fatalf("update ServiceProvider status: %v", err)
	}
	got := &providerv1alpha1.ServiceProvider{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(sp), got); err != nil {
		t.Fatalf("get ServiceProvider: %v", err)
	}
	if diff := cmp.Diff(*want, got.Status); diff != "" {
		t.Errorf("ServiceProvider status after a status update (-want +got):\n%s", diff)
	}

	cr := omcpFixture(t, "clusterrequest.yaml")
	cr.SetName("columns-check")
	if err := c.Client.Create(ctx, cr); err != nil {
		t.Fatalf("create ClusterRequest: %v", err)
	}
	if err := unstructured.SetNestedField(cr.Object, map[string]any{
		"phase":   clustersv1alpha1.RequestGranted,
		"cluster": map[string]any{"name": "mcp-a1b2c3", "namespace": "clusters"},
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Granted", "message": "cluster assigned",
			"lastTransitionTime": "2026-01-02T03:04:05Z",
		}},
	}, "status"); err != nil {
		t.Fatalf("set status: %v", err)
	}
	if err := c.Client.Status().Update(ctx, cr); err != nil {
		t.Fatalf("update ClusterRequest status: %v", err)
	}

	// What `kubectl get` prints comes from the server-side table; check the
	// cells an operator scans for.
	cases := map[string]struct {
		reason string
		path   string
		want   map[string]any
	}{
		"ServiceProvider": {
			reason: "operators scan providers for image, phase and readiness",
			path:   "/apis/openmcp.cloud/v1alpha1/serviceproviders/status-check",
			want: map[string]any{
				"Image": "ghcr.io/openmcp-project/images/service-provider-example:v1.0.0",
				"Phase": "Ready",
				"Ready": "True",
			},
		},
		"ClusterRequest": {
			reason: "operators scan requests for purpose and the cluster they got",
			path:   "/apis/clusters.openmcp.cloud/v1alpha1/namespaces/clusters/clusterrequests/columns-check",
			want: map[string]any{
				"Purpose":    "mcp",
				"Phase":      "Granted",
				"Ready":      "True",
				"Cluster":    "mcp-a1b2c3",
				"Cluster-NS": "clusters",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			row := tableRow(t, c.Config, tc.path)
			got := map[string]any{}
			for col := range tc.want {
				got[col] = row[col]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nprinted columns (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// testOMCPShortNames checks on the live API server that no resource outside the
// openMCP groups answers to one of their short names, so that `kubectl get
// sp` cannot mean two things.
func testOMCPShortNames(t *testing.T, c *testenv.Cluster) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatalf("discovery client: %v", err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatalf("discover resources: %v", err)
	}
	ours := map[string]string{}
	others := map[string]string{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatalf("discovery returned group version %q: %v", list.GroupVersion, err)
		}
		for _, r := range list.APIResources {
			for _, sn := range r.ShortNames {
				if slices.Contains(openMCPGroups, gv.Group) {
					ours[sn] = r.Name + "." + gv.Group
				} else {
					others[sn] = r.Name + " (" + gv.String() + ")"
				}
			}
		}
	}
	if len(ours) == 0 {
		t.Fatalf("the API server lists no short names for the openMCP groups")
	}
	for sn, res := range ours {
		if other, clash := others[sn]; clash {
			t.Errorf("short name %q of %s is also used by %s", sn, res, other)
		}
	}
}

// openMCPKinds returns the kinds of the embedded CRDs of the openMCP groups.
func openMCPKinds(t *testing.T) []string {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatalf("crds.All(): %v", err)
	}
	var kinds []string
	for _, crd := range all {
		if slices.Contains(openMCPGroups, crd.Spec.Group) {
			kinds = append(kinds, crd.Spec.Names.Kind)
		}
	}
	if len(kinds) == 0 {
		t.Fatalf("no CRDs of the groups %v are embedded", openMCPGroups)
	}
	return kinds
}

// omcpFixture reads the single object of testdata/openmcp/<file>.
func omcpFixture(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "openmcp", file))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	objs, err := manifests.Decode(data)
	if err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	if len(objs) != 1 {
		t.Fatalf("%s holds %d objects, want 1", file, len(objs))
	}
	return objs[0]
}

// omcpLookup returns the value at path in obj, or nil when there is none. The
// path is dotted; a segment may end in [i] to pick a list item, as in
// "spec.providers[0].name".
func omcpLookup(obj any, path string) any {
	cur := obj
	for _, seg := range strings.Split(path, ".") {
		name, index, hasIndex := strings.Cut(seg, "[")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[name]
		if !hasIndex {
			continue
		}
		i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
		list, ok := cur.([]any)
		if err != nil || !ok || i < 0 || i >= len(list) {
			return nil
		}
		cur = list[i]
	}
	return cur
}

// omcpGet reads obj back from the API server.
func omcpGet(t *testing.T, c *testenv.Cluster, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("get %s %s: %v", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return got
}

func omcpApplyEdits(t *testing.T, obj *unstructured.Unstructured, edits []omcpEdit) {
	t.Helper()
	for _, e := range edits {
		if err := e(obj.Object); err != nil {
			t.Fatalf("edit %s: %v", obj.GetName(), err)
		}
	}
}

// omcpCheckRejected fails unless err is the API server's Invalid error and its
// message contains every part of want.
func omcpCheckRejected(t *testing.T, reason string, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s\nthe API server accepted the object; want it rejected with %q", reason, want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("%s\nwant an Invalid error, got %T: %v", reason, err, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s\nthe rejection does not say %q:\n%v", reason, w, err)
		}
	}
}

var omcpNonNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// omcpObjectName turns a test case name into a valid, unique object name.
func omcpObjectName(caseName string) string {
	n := strings.Trim(omcpNonNameChars.ReplaceAllString(strings.ToLower(caseName), "-"), "-")
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}

// tableRow fetches the server-side table of one object, as kubectl does, and
// returns its cells by column name. The tests of every API group in this
// package use it.
func tableRow(t *testing.T, cfg *rest.Config, path string) map[string]any {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("HTTP client: %v", err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatalf("build request: %v", err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decode table: %v", err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("table of %s has %d rows, want 1", path, len(table.Rows))
	}
	row := map[string]any{}
	for i, col := range table.ColumnDefinitions {
		if i < len(table.Rows[0].Cells) {
			row[col.Name] = table.Rows[0].Cells[i]
		}
	}
	return row
}
