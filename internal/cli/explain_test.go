package cli

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	"github.com/marketplane/marketplane/internal/marketplace"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// kindSchema is a kind's spec schema as a CRD declares it.
const kindSchema = `{"type":"object","description":"SampleSpec is what a tenant asks for.",
 "required":["version"],
 "properties":{
  "version":{"type":"string","description":"Version of the domain service.","enum":["v1","v2"],"maxLength":63},
  "replicas":{"type":"integer","minimum":1,"maximum":5,"default":1,"description":"How many servers."},
  "tags":{"type":"array","items":{"type":"string"}},
  "labels":{"type":"object","additionalProperties":{"type":"string"}},
  "backup":{"type":"object","description":"Backup settings.","properties":{"schedule":{"type":"string","pattern":"^@daily$"}}},
  "port":{"x-kubernetes-int-or-string":true}
 }}`

func providerOffering(kinds ...marketplacev1alpha1.OfferedKind) *marketplacev1alpha1.Offering {
	return &marketplacev1alpha1.Offering{
		ObjectMeta: metav1.ObjectMeta{Name: "sp-sample"},
		Spec: marketplacev1alpha1.OfferingSpec{
			Source:  marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceServiceProvider, Name: "sample"},
			Version: "v0.3.0", Ready: true, Kinds: kinds,
		},
	}
}

func sampleKind(kind string) marketplacev1alpha1.OfferedKind {
	return marketplacev1alpha1.OfferedKind{
		Group: "sample.services.openmcp.cloud", Version: "v1alpha1", Kind: kind, Plural: strings.ToLower(kind) + "s", Scope: "Namespaced",
		Schema: &apiextensionsv1.JSON{Raw: []byte(kindSchema)},
	}
}

func sfOffering() *marketplacev1alpha1.Offering {
	params := `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","required":["pods"],
	 "properties":{"pods":{"type":"integer","minimum":1,"maximum":10,"description":"Most pods in the namespace."}}}`
	return &marketplacev1alpha1.Offering{
		ObjectMeta: metav1.ObjectMeta{Name: "sf-catalog-ns"},
		Spec: marketplacev1alpha1.OfferingSpec{
			Source:    marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceSFService, Name: "ns", Namespace: "catalog"},
			ServiceID: "svc-1", Ready: true,
			Plans: []marketplacev1alpha1.Plan{
				{ID: "p-small", Name: "small", Free: true, Bindable: true, Schemas: &marketplacev1alpha1.PlanSchemas{InstanceCreate: &apiextensionsv1.JSON{Raw: []byte(params)}}},
				{ID: "p-large", Name: "large"},
			},
		},
	}
}

func TestExplainServiceProviderOffering(t *testing.T) {
	out, err := explainOffering(providerOffering(sampleKind("Sample")), explainRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"OFFERING:  sp-sample (ServiceProvider sample, version v0.3.0, ready)",
		"KIND:      Sample",
		"GROUP:     sample.services.openmcp.cloud/v1alpha1 (samples, Namespaced)",
		"FIELD:     spec <object>",
		"SampleSpec is what a tenant asks for.",
		"  version\t<string> -required-\n    (one of: \"v1\", \"v2\"; max length: 63)\n    Version of the domain service.",
		"  replicas\t<integer>\n    (default: 1; minimum: 1; maximum: 5)",
		"  tags\t<[]string>",
		"  labels\t<map[string]string>",
		"  port\t<int-or-string>",
		"  backup\t<object>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q; got:\n%s", want, out)
		}
	}
	if strings.Contains(out, "schedule") {
		t.Errorf("explain without --recursive lists a nested field:\n%s", out)
	}

	out, err = explainOffering(providerOffering(sampleKind("Sample")), explainRequest{field: "spec.backup.schedule"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "FIELD:     spec.backup.schedule <string>\n           (pattern: ^@daily$)") {
		t.Errorf("explain spec.backup.schedule:\n%s", out)
	}
	out, err = explainOffering(providerOffering(sampleKind("Sample")), explainRequest{recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "  backup\t<object>\n    schedule\t<string>") || strings.Contains(out, "How many servers.") {
		t.Errorf("explain --recursive lists nested fields without descriptions; got:\n%s", out)
	}

	for _, tc := range []struct {
		name    string
		o       *marketplacev1alpha1.Offering
		req     explainRequest
		wantErr string
	}{
		{"missing field", providerOffering(sampleKind("Sample")), explainRequest{field: "spec.size"}, `field "size" does not exist: spec has backup, labels, port, replicas, tags, version`},
		{"two kinds", providerOffering(sampleKind("Sample"), sampleKind("Other")), explainRequest{}, "several kinds; choose one with --kind: Sample, Other"},
		{"unknown kind", providerOffering(sampleKind("Sample")), explainRequest{kind: "Nope"}, `no kind "Nope"; it offers: Sample`},
		{"no kinds", providerOffering(), explainRequest{}, "offers no kinds"},
		{"no schema", providerOffering(marketplacev1alpha1.OfferedKind{Kind: "Sample"}), explainRequest{}, "kind Sample has no schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := explainOffering(tc.o, tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %v; want one containing %q", err, tc.wantErr)
			}
		})
	}
	// --kind matches the plural too, as kubectl does.
	if _, err := explainOffering(providerOffering(sampleKind("Sample"), sampleKind("Other")), explainRequest{kind: "others"}); err != nil {
		t.Errorf("--kind others: %v", err)
	}
}

func TestExplainSFServiceOffering(t *testing.T) {
	out, err := explainOffering(sfOffering(), explainRequest{plan: "small"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"OFFERING:  sf-catalog-ns (SFService catalog/ns, service id svc-1, ready)",
		"PLAN:      small (id p-small, free, bindable)",
		"SCHEMA:    instance create (parameters of a provision)",
		"FIELD:     parameters <object>",
		"  pods\t<integer> -required-\n    (minimum: 1; maximum: 10)\n    Most pods in the namespace.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q; got:\n%s", want, out)
		}
	}
	out, err = explainOffering(sfOffering(), explainRequest{plan: "p-small", schema: "bind"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "The plan declares no parameters for this operation.") {
		t.Errorf("a plan without a bind schema:\n%s", out)
	}
	for _, tc := range []struct {
		name    string
		req     explainRequest
		wantErr string
	}{
		{"two plans", explainRequest{}, "several plans; choose one with --plan: small, large"},
		{"unknown plan", explainRequest{plan: "huge"}, `no plan "huge"; its plans: small, large`},
		{"bad schema", explainRequest{plan: "small", schema: "delete"}, `--schema "delete": want create, update or bind`},
		{"missing field", explainRequest{plan: "small", field: "parameters.size"}, `field "size" does not exist: parameters has pods`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := explainOffering(sfOffering(), tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %v; want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestOfferingsCommandAsTenant runs `marketplane offerings list` and
// `explain` against a real API server with the credentials of a tenant who
// has no rights but those every authenticated user gets from the
// marketplace's viewer RBAC.
func TestOfferingsCommandAsTenant(t *testing.T) {
	testenv.SkipIfShort(t)
	env := testenv.Start(t)
	ctx := t.Context()
	if err := marketplace.Init(ctx, env.Client, 0); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*marketplacev1alpha1.Offering{providerOffering(sampleKind("Sample")), sfOffering()} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}); err != nil {
		t.Fatal(err)
	}
	token := env.ServiceAccountToken(t, "tenant-a", "alice")
	kubeconfig := filepath.Join(t.TempDir(), "alice.kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["onboarding"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["alice"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["onboarding"] = &clientcmdapi.Context{Cluster: "onboarding", AuthInfo: "alice"}
	cfg.CurrentContext = "onboarding"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := NewRootCommand(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	out, err := run("offerings", "list", "--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatalf("offerings list: %v\n%s", err, out)
	}
	for _, want := range []string{"NAME", "ORDER WITH", "sp-sample", "ServiceProvider", "Sample", "sf-catalog-ns", "plan small, plan large"} {
		if !strings.Contains(out, want) {
			t.Errorf("offerings list lacks %q:\n%s", want, out)
		}
	}
	out, err = run("offerings", "explain", "--kubeconfig", kubeconfig, "sf-catalog-ns", "--plan", "small", "parameters.pods")
	if err != nil {
		t.Fatalf("offerings explain: %v\n%s", err, out)
	}
	if !strings.Contains(out, "FIELD:     parameters.pods <integer>") {
		t.Errorf("offerings explain sf-catalog-ns parameters.pods:\n%s", out)
	}
	if out, err := run("offerings", "explain", "--kubeconfig", kubeconfig, "sp-missing"); err == nil || !strings.Contains(err.Error(), `offerings.marketplace.services.openmcp.cloud "sp-missing" not found`) {
		t.Errorf("explain of a missing offering: %v\n%s", err, out)
	}
	// The command acts with the tenant's own credentials: without the
	// viewer binding the same call is refused.
	if err := env.Client.Delete(ctx, marketplace.ViewerBinding()); err != nil {
		t.Fatal(err)
	}
	if out, err := run("offerings", "list", "--kubeconfig", kubeconfig); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("offerings list without the viewer binding: %v\n%s", err, out)
	}
}

// TestOfferingsCommandErrors: without a kubeconfig, or without the
// offering to explain, the commands say what to pass instead of
// client-go's or cobra's bare message.
func TestOfferingsCommandErrors(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", home)
	t.Setenv("KUBERNETES_MASTER", "")
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"ListWithoutKubeconfig":    {[]string{"offerings", "list"}, "no kubeconfig: pass --kubeconfig FILE or set KUBECONFIG"},
		"ExplainWithoutKubeconfig": {[]string{"offerings", "explain", "sp-sample"}, "no kubeconfig: pass --kubeconfig FILE or set KUBECONFIG"},
		"ExplainWithoutOffering":   {[]string{"offerings", "explain"}, "name the offering to explain: marketplane offerings explain OFFERING [FIELD]"},
		"ExplainTooMany":           {[]string{"offerings", "explain", "a", "b", "c"}, "3 arguments: want OFFERING and at most one FIELD"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := NewRootCommand(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: %v; want an error with %q", tc.args, err, tc.want)
			}
		})
	}
}
