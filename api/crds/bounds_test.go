package crds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/crdtest"
)

// boundRequestLimit is how long the API server may take to answer one
// request of the bound tests. A quantity parsed the slow way takes minutes
// or never finishes (resource.ParseQuantity("1E-99999999") did not in five
// seconds); the rule answers in milliseconds. The limit separates the two on
// a loaded machine; the tests log the slowest answer.
const boundRequestLimit = 10 * time.Second

// fieldsOf walks the Go types of every kind (Marketplane's and the sample
// provider's) and returns the fields keep selects, sorted.
func fieldsOf(t *testing.T, keep func(path []string, typ, owner reflect.Type) bool) []apiField {
	t.Helper()
	s, ours := apiScheme(t)
	var out []apiField
	for gvk, typ := range s.AllKnownTypes() {
		if !ours(gvk.Group) || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		walkFields(typ, nil, nil, map[reflect.Type]bool{}, func(path []string, ft, owner reflect.Type) {
			if len(path) > 0 && keep(path, ft, owner) {
				out = append(out, apiField{GVK: gvk, Path: slices.Clone(path)})
			}
		})
	}
	slices.SortFunc(out, func(a, b apiField) int {
		return strings.Compare(a.GVK.String()+a.String(), b.GVK.String()+b.String())
	})
	return out
}

// quantityFields returns every resource.Quantity field, those of
// Kubernetes' types included (a provider's extraVolumes).
func quantityFields(t *testing.T) []apiField {
	t.Helper()
	q := reflect.TypeFor[resource.Quantity]()
	return fieldsOf(t, func(_ []string, typ, _ reflect.Type) bool { return typ == q })
}

// isKubernetesType reports whether a field is declared by one of
// Kubernetes' own types (corev1.Volume in extraVolumes, rbacv1.PolicyRule,
// …), which no marker of ours reaches.
func isKubernetesType(owner reflect.Type) bool {
	return owner != nil && strings.HasPrefix(owner.PkgPath(), "k8s.io/")
}

// integerSpecFields returns every integer field below spec declared by a
// Marketplane type.
func integerSpecFields(t *testing.T) []apiField {
	t.Helper()
	return fieldsOf(t, func(path []string, typ, owner reflect.Type) bool {
		switch typ.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return path[0] == "spec" && !isKubernetesType(owner)
		}
		return false
	})
}

// TestEveryQuantityFieldIsBounded checks, without an API server, that every
// quantity field of every kind carries the bound of common.QuantityRule in
// its CRD (hack/crdbounds writes it in `make generate`), and that every list
// and map on the way to it is bounded, without which the API server refuses
// the CRD for the rule's estimated cost. A quantity field without the bound
// fails the test, named.
func TestEveryQuantityFieldIsBounded(t *testing.T) {
	fields := quantityFields(t)
	if len(fields) == 0 {
		t.Fatal("found no quantity field; the walk is broken")
	}
	all := allCRDs(t)
	for _, f := range fields {
		chain, err := crdSchemaPath(all, f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if problem := quantityBoundProblem(chain[len(chain)-1]); problem != "" {
			t.Errorf("%s is a quantity without the bound of common.QuantityRule (run make generate): %s", f, problem)
		}
		for i, p := range chain[:len(chain)-1] {
			if p.Items != nil && p.MaxItems == nil || p.AdditionalProperties != nil && p.MaxProperties == nil {
				t.Errorf("%s: the list or map %s has no maxItems or maxProperties; the quantity's rule needs one", f, strings.Join(f.Path[:i], "."))
			}
		}
	}
	// The schemas themselves, in case a quantity hides where the Go walk
	// does not look (raw JSON, an embedded object).
	for _, crd := range all {
		for _, v := range crd.Spec.Versions {
			walkSchema(*v.Schema.OpenAPIV3Schema, crd.Name, func(path string, p apiextensionsv1.JSONSchemaProps) {
				if p.XIntOrString && strings.Contains(p.Pattern, "[numkMGTPE]") {
					if problem := quantityBoundProblem(p); problem != "" {
						t.Errorf("%s is a quantity without the bound: %s", path, problem)
					}
				}
			})
		}
	}
}

// quantityBoundProblem says what p lacks of the bound; "" when it has it.
func quantityBoundProblem(p apiextensionsv1.JSONSchemaProps) string {
	if p.MaxLength == nil || *p.MaxLength != common.QuantityMaxLength {
		return fmt.Sprintf("maxLength is not %d", common.QuantityMaxLength)
	}
	n := 0
	for _, r := range p.XValidations {
		if r.Rule == common.QuantityRule && r.Message == common.QuantityMessage {
			n++
		}
	}
	if n != 1 {
		return fmt.Sprintf("%d rules, want the rule of common.QuantityRule once", len(p.XValidations))
	}
	return ""
}

// walkSchema calls visit for every schema below p with its path.
func walkSchema(p apiextensionsv1.JSONSchemaProps, path string, visit func(string, apiextensionsv1.JSONSchemaProps)) {
	visit(path, p)
	for name, child := range p.Properties {
		walkSchema(child, path+"."+name, visit)
	}
	if p.Items != nil && p.Items.Schema != nil {
		walkSchema(*p.Items.Schema, path+"[]", visit)
	}
	if p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
		walkSchema(*p.AdditionalProperties.Schema, path+"{}", visit)
	}
}

// TestEveryIntegerSpecFieldHasAMaximum checks, without an API server, that
// every integer below spec of a Marketplane type has a maximum in its CRD,
// chosen with a reason written next to the field (docs/api.md, "Integer
// maxima"). Integers of Kubernetes' types (a provider's extraVolumes and
// topologySpreadConstraints) are left to Kubernetes, which validates them
// when the operator creates the pods; the API server refuses values beyond
// their int32 or int64 format in every field, so none fails to decode.
func TestEveryIntegerSpecFieldHasAMaximum(t *testing.T) {
	fields := integerSpecFields(t)
	if len(fields) == 0 {
		t.Fatal("found no integer field; the walk is broken")
	}
	all := allCRDs(t)
	for _, f := range fields {
		p, err := crdProperty(all, f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if p.Maximum == nil {
			t.Errorf("%s is an integer without a maximum: add +kubebuilder:validation:Maximum, with its reason in the field's comment", f)
		}
	}
}

// TestQuantityBoundsOnAPIServer sends every string of the quantity corpus
// (the bombs of kubernetes/kubernetes#131063, a 10,000-digit number, values
// beyond 2^63-1, ordinary quantities) in every quantity field to a real API
// server (dry run), and JSON numbers as well. It accepts exactly what
// common.ParseQuantity accepts, refuses the rest with 422 naming the field,
// and answers every request quickly.
func TestQuantityBoundsOnAPIServer(t *testing.T) {
	c := apiServer(t)
	raw := rawClient(t, c.Config)
	const ns = "quantities"
	if err := c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	all := allCRDs(t)
	var slowest, slowestRefusal time.Duration
	var slowestValue, slowestRefusalValue string
	for i, f := range quantityFields(t) {
		t.Run(strings.ReplaceAll(f.GVK.Group+"/"+f.String(), " ", "_"), func(t *testing.T) {
			send := fieldSender(t, raw, all, f, ns, fmt.Sprintf("q-%d", i))
			chain, err := crdSchemaPath(all, f)
			if err != nil {
				t.Fatal(err)
			}
			check := func(value string, jsonValue []byte, wantOK bool) {
				start := time.Now()
				err := send(jsonValue)
				took := time.Since(start)
				if took > slowest {
					slowest, slowestValue = took, fmt.Sprintf("%.40s in %s", value, f)
				}
				if err != nil && took > slowestRefusal {
					slowestRefusal, slowestRefusalValue = took, fmt.Sprintf("%.40s in %s", value, f)
				}
				if took > boundRequestLimit {
					t.Errorf("%.40s: the API server took %s, more than %s", value, took, boundRequestLimit)
				}
				switch {
				case wantOK && err != nil:
					t.Errorf("%.40s: refused, want it accepted: %.300v", value, err)
				case !wantOK && err == nil:
					t.Errorf("%.40s: accepted, want it refused", value)
				}
				if err != nil && !wantOK {
					checkRefusal(t, f, chain, value, err)
				}
			}
			for _, s := range append(slices.Clone(crdtest.QuantityAccepted), crdtest.QuantityRefused...) {
				_, parseErr := common.ParseQuantity(s)
				js, _ := json.Marshal(s)
				check(s, js, parseErr == nil)
			}
			// A JSON number arrives as an int when it is one of int64; the
			// rest (floats, 1e999999999, 10,000 digits) never reaches the
			// rule: 400 when it does not decode, 422 when it is no integer.
			for _, n := range []string{"0", "2", "9223372036854775807"} {
				check("number "+n, []byte(n), true)
			}
			for _, n := range []string{"-1", "1.5", "9223372036854775808", "1e19", "1e999999999", strings.Repeat("9", 10000)} {
				check("number "+n, []byte(n), false)
			}
		})
	}
	// The first request to a CRD is often the slowest answer: the API
	// server compiles its rules then.
	t.Logf("slowest refusal: %s (%s); slowest answer: %s (%s)", slowestRefusal, slowestRefusalValue, slowest, slowestValue)
}

// checkRefusal fails t unless err is the API server's refusal of value in
// field f: 400 for a JSON number that does not decode, otherwise 422 naming
// the field, with the rule's message or, for a value too long to check,
// maxLength's.
func checkRefusal(t *testing.T, f apiField, chain []apiextensionsv1.JSONSchemaProps, value string, err error) {
	t.Helper()
	if apierrors.IsBadRequest(err) && strings.HasPrefix(value, "number ") {
		return
	}
	msg := err.Error()
	named := false
	for _, p := range fieldPaths(f, chain) {
		named = named || strings.Contains(msg, p+":")
	}
	switch {
	case !apierrors.IsInvalid(err):
		t.Errorf("%.40s: refused with %.300v, want 422", value, err)
	case !named:
		t.Errorf("%.40s: the refusal does not name the field %s (%q): %.300v", value, f, fieldPaths(f, chain), err)
	case !strings.Contains(msg, common.QuantityMessage) && !strings.Contains(msg, "Too long") && !strings.HasPrefix(value, "number "):
		t.Errorf("%.40s: refused without the rule's message: %.300v", value, err)
	}
}

// fieldPaths returns how the API server names field f, as fieldSender
// fills it: a list's item is [0], a map's value [cpu] in the messages of
// rules and .cpu in those of the schema.
func fieldPaths(f apiField, chain []apiextensionsv1.JSONSchemaProps) []string {
	var rule, schema strings.Builder
	for i, name := range f.Path {
		switch {
		case name != "[]":
			if i > 0 {
				rule.WriteString(".")
				schema.WriteString(".")
			}
			rule.WriteString(name)
			schema.WriteString(name)
		case chain[i].Items != nil:
			rule.WriteString("[0]")
			schema.WriteString("[0]")
		default:
			rule.WriteString("[" + mapKey + "]")
			schema.WriteString("." + mapKey)
		}
	}
	return []string{rule.String(), schema.String()}
}

// mapKey is the key under which the bound tests put a value into a map.
const mapKey = "cpu"

// TestIntegerMaximaOnAPIServer sends every integer field below spec its
// maximum, which the API server accepts, and one more, which it refuses
// with 422 naming the field.
func TestIntegerMaximaOnAPIServer(t *testing.T) {
	c := apiServer(t)
	raw := rawClient(t, c.Config)
	const ns = "integers"
	if err := c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	all := allCRDs(t)
	for i, f := range integerSpecFields(t) {
		t.Run(strings.ReplaceAll(f.GVK.Group+"/"+f.String(), " ", "_"), func(t *testing.T) {
			p, err := crdProperty(all, f)
			if err != nil || p.Maximum == nil {
				t.Skipf("%s has no maximum; TestEveryIntegerSpecFieldHasAMaximum reports it", f)
			}
			send := fieldSender(t, raw, all, f, ns, fmt.Sprintf("i-%d", i))
			maximum := int64(*p.Maximum)
			if err := send([]byte(strconv.FormatInt(maximum, 10))); err != nil {
				t.Errorf("the maximum %d is refused: %.300v", maximum, err)
			}
			err = send([]byte(strconv.FormatInt(maximum+1, 10)))
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), f.Path[len(f.Path)-1]) {
				t.Errorf("%d: %v, want 422 naming %s", maximum+1, err, f)
			}
		})
	}
}

// rawClient returns a REST client that sends bodies as they are: JSON
// numbers that no Go value holds (1e999999999) included.
func rawClient(t *testing.T, cfg *rest.Config) rest.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.CoreV1().RESTClient()
}

// fieldSender returns a function that puts a JSON value into field f of an
// object of f's kind and sends it to the API server as a dry run: a create
// for a spec field; for a status field, an update of the status of an
// object it creates first. The object has what the CRD's schema requires
// (required properties, minimum items), nothing more.
func fieldSender(t *testing.T, raw rest.Interface, all []*apiextensionsv1.CustomResourceDefinition, f apiField, ns, name string) func(value []byte) error {
	t.Helper()
	crd := crdOf(all, f.GVK)
	if crd == nil {
		t.Fatalf("no CRD of %s", f.GVK)
	}
	var root *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == f.GVK.Version {
			root = v.Schema.OpenAPIV3Schema
		}
	}
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	resource := "/apis/" + f.GVK.Group + "/" + f.GVK.Version + "/"
	if namespaced {
		resource += "namespaces/" + ns + "/"
	}
	resource += crd.Spec.Names.Plural

	base := &unstructured.Unstructured{Object: minimalValue(root).(map[string]any)}
	delete(base.Object, "status")
	base.SetGroupVersionKind(f.GVK)
	base.SetName(name)
	if namespaced {
		base.SetNamespace(ns)
	}
	status := f.Path[0] == "status"
	if status {
		body, err := json.Marshal(base.Object)
		if err != nil {
			t.Fatal(err)
		}
		created, err := raw.Post().AbsPath(resource).Body(body).SetHeader("Content-Type", "application/json").Do(t.Context()).Raw()
		if err != nil {
			t.Fatalf("create the %s whose status the test sets: %v", f.GVK.Kind, err)
		}
		if err := json.Unmarshal(created, &base.Object); err != nil {
			t.Fatal(err)
		}
	}
	// The value goes in as a placeholder that is then replaced by the raw
	// JSON, so that any JSON number can be sent.
	const placeholder = "__bound-test-value__"
	obj := withValue(root, runtime.DeepCopyJSON(base.Object), f.Path, placeholder).(map[string]any)
	tmpl, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return func(value []byte) error {
		body := []byte(strings.Replace(string(tmpl), `"`+placeholder+`"`, string(value), 1))
		ctx, cancel := context.WithTimeout(context.Background(), 2*boundRequestLimit)
		defer cancel()
		req := raw.Post().AbsPath(resource)
		if status {
			req = raw.Put().AbsPath(resource, name, "status")
		}
		res := req.Param("dryRun", "All").Body(body).SetHeader("Content-Type", "application/json").Do(ctx)
		var code int
		res.StatusCode(&code)
		if err := res.Error(); err != nil {
			return err
		}
		if code != http.StatusCreated && code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		return nil
	}
}

// minimalValue returns the smallest value of schema s as far as its types,
// required properties, minimum items and minimums go.
func minimalValue(s *apiextensionsv1.JSONSchemaProps) any {
	switch {
	case s.XIntOrString:
		return "1"
	case len(s.Enum) > 0:
		var v any
		_ = json.Unmarshal(s.Enum[0].Raw, &v)
		return v
	}
	switch s.Type {
	case "object":
		m := map[string]any{}
		for _, name := range s.Required {
			p := s.Properties[name]
			m[name] = minimalValue(&p)
		}
		return m
	case "array":
		l := []any{}
		if s.MinItems != nil && s.Items != nil && s.Items.Schema != nil {
			for i := range *s.MinItems {
				item := minimalValue(s.Items.Schema)
				if _, ok := item.(string); ok {
					item = fmt.Sprintf("a%d", i) // items of a set differ
				}
				l = append(l, item)
			}
		}
		return l
	case "string":
		return "a"
	case "integer":
		if s.Minimum != nil {
			return int64(*s.Minimum)
		}
		return int64(1)
	case "boolean":
		return false
	}
	return map[string]any{}
}

// withValue returns v, a value of schema s, with value put at path; a list
// on the way gets one item, a map the key mapKey.
func withValue(s *apiextensionsv1.JSONSchemaProps, v any, path []string, value any) any {
	if len(path) == 0 {
		return value
	}
	if path[0] == "[]" {
		if s.Items != nil && s.Items.Schema != nil {
			return []any{withValue(s.Items.Schema, minimalValue(s.Items.Schema), path[1:], value)}
		}
		m, _ := v.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		elem := s.AdditionalProperties.Schema
		m[mapKey] = withValue(elem, minimalValue(elem), path[1:], value)
		return m
	}
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	child := s.Properties[path[0]]
	cur, ok := m[path[0]]
	if !ok {
		cur = minimalValue(&child)
	}
	m[path[0]] = withValue(&child, cur, path[1:], value)
	return m
}

// tenantKinds are the kinds tenants write: their spec is what a tenant
// controls on the onboarding cluster.
var tenantKinds = []string{"SFServiceInstance", "SFServiceBinding", "ManagedControlPlane", "ControlPlane"}

// unboundedTenantFields are the parts of a tenant kind's spec that have no
// maxLength, maxItems or maxProperties of their own, each with the reason
// (docs/api.md, "Tenant-written fields"). Paths are below the object;
// [] is a list's item, {} a map's value.
var unboundedTenantFields = map[string]string{
	"spec.context":               "OSB context, free-form as in Service Fabrik: only the API server's request size bounds it",
	"spec.parameters":            "OSB parameters, free-form: the inter-operator refuses more than 256 KiB (MaxParametersBytes)",
	"spec.previousValues":        "OSB previous_values, free-form as in Service Fabrik: only the request size bounds it",
	"spec.bindResource":          "OSB bind_resource, free-form as in Service Fabrik: only the request size bounds it",
	"spec.metadata.labels{}":     "the values of a map, which no marker reaches: the map's CEL rule bounds keys and values",
	"spec.metadata.attributes{}": "the values of a map, which no marker reaches: the map's CEL rule bounds keys and values",
	"spec.iam.tokens[].permissions[].rules[]": "Kubernetes' PolicyRule: the MCP's API server validates it when the operator " +
		"creates the Role; the lists holding it are bounded",
	"spec.iam.oidc.defaultProvider.roleBindings[].subjects[]": "Kubernetes' Subject: validated when the RoleBinding is created; " +
		"the lists holding it are bounded",
	"spec.iam.oidc.extraProviders[].roleBindings[].subjects[]": "Kubernetes' Subject: validated when the RoleBinding is created; " +
		"the lists holding it are bounded",
}

// TestTenantSpecFieldsAreBounded walks the CRD schemas of the kinds tenants
// write: every string below spec has a maxLength (or is an enum), every
// list a maxItems and every map a maxProperties, except the parts listed in
// unboundedTenantFields with their reasons. A new unbounded field fails
// the test, named.
func TestTenantSpecFieldsAreBounded(t *testing.T) {
	all := allCRDs(t)
	seen := map[string]bool{}
	for _, kind := range tenantKinds {
		for _, v := range crdByKind(t, all, kind).Spec.Versions {
			walkBounded(t, kind, v.Schema.OpenAPIV3Schema.Properties["spec"], "spec", seen)
		}
	}
	for path := range unboundedTenantFields {
		if !seen[path] {
			t.Errorf("unboundedTenantFields lists %s, which no tenant kind has: remove it", path)
		}
	}
}

// walkBounded reports every unbounded part of p (at path) that
// unboundedTenantFields does not list, and records the listed ones it met
// in seen.
func walkBounded(t *testing.T, kind string, p apiextensionsv1.JSONSchemaProps, path string, seen map[string]bool) {
	t.Helper()
	if _, listed := unboundedTenantFields[path]; listed {
		seen[path] = true
		return
	}
	switch {
	case p.Type == "string" && p.MaxLength == nil && len(p.Enum) == 0:
		t.Errorf("%s %s is a string without maxLength", kind, path)
	case p.Type == "array" && p.MaxItems == nil:
		t.Errorf("%s %s is a list without maxItems", kind, path)
	case p.AdditionalProperties != nil && p.MaxProperties == nil:
		t.Errorf("%s %s is a map without maxProperties", kind, path)
	case p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields:
		t.Errorf("%s %s is free-form, unbounded", kind, path)
	}
	for name, child := range p.Properties {
		walkBounded(t, kind, child, path+"."+name, seen)
	}
	if p.Items != nil && p.Items.Schema != nil {
		walkBounded(t, kind, *p.Items.Schema, path+"[]", seen)
	}
	if p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
		walkBounded(t, kind, *p.AdditionalProperties.Schema, path+"{}", seen)
	}
}

// TestTenantBoundsOnAPIServer sends tenant-written fields at their bound,
// which the API server accepts, and past it, which it refuses with 422
// naming the field.
func TestTenantBoundsOnAPIServer(t *testing.T) {
	c := apiServer(t)
	raw := rawClient(t, c.Config)
	const ns = "tenants"
	if err := c.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	all := allCRDs(t)
	gvk := func(kind string) schema.GroupVersionKind {
		crd := crdByKind(t, all, kind)
		return schema.GroupVersionKind{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Kind: kind}
	}
	str := func(n int) string { return strconv.Quote(strings.Repeat("a", n)) }
	toJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	labels := func(n, keyLen, valueLen int) string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("%0*d", keyLen, i)] = strings.Repeat("v", valueLen)
		}
		return toJSON(m)
	}
	tokens := func(n int) string {
		var l []map[string]string
		for i := range n {
			l = append(l, map[string]string{"name": fmt.Sprintf("t%d", i)})
		}
		return toJSON(l)
	}
	providers := func(n int) string {
		var l []map[string]any
		for i := range n {
			l = append(l, map[string]any{"name": fmt.Sprintf("p%d", i), "issuer": "https://issuer.example", "clientID": "c", "roleBindings": []any{}})
		}
		return toJSON(l)
	}
	cases := []struct {
		kind   string
		path   string
		ok, no string // a value at the bound, one past it
	}{
		{"SFServiceInstance", "spec.instanceId", str(1024), str(1025)},
		{"SFServiceInstance", "spec.planId", str(1024), str(1025)},
		{"SFServiceInstance", "spec.clusterId", str(253), str(254)},
		{"SFServiceInstance", "spec.metadata.labels", labels(64, 256, 1024), labels(65, 3, 1)},
		{"SFServiceInstance", "spec.metadata.labels", labels(1, 256, 1), labels(1, 257, 1)},
		{"SFServiceInstance", "spec.metadata.attributes", labels(1, 1, 1024), labels(1, 1, 1025)},
		{"SFServiceBinding", "spec.id", str(1024), str(1025)},
		{"SFServiceBinding", "spec.appGuid", str(1024), str(1025)},
		{"ManagedControlPlane", "spec.iam.tokens", tokens(64), tokens(65)},
		{"ManagedControlPlane", "spec.iam.oidc.extraProviders", providers(63), providers(64)},
		{"ControlPlane", "spec.iam.tokens", tokens(64), tokens(65)},
	}
	for i, tc := range cases {
		f := apiField{GVK: gvk(tc.kind), Path: strings.Split(tc.path, ".")}
		send := fieldSender(t, raw, all, f, ns, fmt.Sprintf("t-%d", i))
		if err := send([]byte(tc.ok)); err != nil {
			t.Errorf("%s %s at its bound: refused: %.300v", tc.kind, tc.path, err)
		}
		err := send([]byte(tc.no))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s %s past its bound: %.300v, want 422 naming the field", tc.kind, tc.path, err)
		}
	}
}

// crdByKind returns the CRD of kind.
func crdByKind(t *testing.T, all []*apiextensionsv1.CustomResourceDefinition, kind string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	for _, c := range all {
		if c.Spec.Names.Kind == kind {
			return c
		}
	}
	t.Fatalf("no CRD of %s", kind)
	return nil
}
