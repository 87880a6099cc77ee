package console

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const cacheSchema = `{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","additionalProperties":false,
"required":["tier"],
"properties":{
 "maxmemory":{"description":"MiB","type":"integer","minimum":16,"maximum":256,"default":64},
 "tier":{"type":"string","enum":["small","large"]},
 "persistent":{"type":"boolean","default":true},
 "label":{"type":"string","minLength":2,"maxLength":8,"pattern":"^[a-z]+$"},
 "ratio":{"type":"number","multipleOf":0.5},
 "tags":{"type":"array","items":{"type":"string"}}}}`

func TestNewForm(t *testing.T) {
	f, err := newForm([]byte(cacheSchema))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]field{}
	var order []string
	for _, fd := range f.Fields {
		got[fd.Name] = fd
		order = append(order, fd.Name)
	}
	if diff := cmp.Diff([]string{"tier", "label", "maxmemory", "persistent", "ratio", "tags"}, order); diff != "" {
		t.Errorf("field order (required first, then by name) -want +got:\n%s", diff)
	}
	for name, c := range map[string]struct {
		reason string
		want   field
	}{
		"maxmemory":  {"integer: number input with min, max, step 1 and the default", field{Name: "maxmemory", Label: "maxmemory", Description: "MiB", Type: "integer", Input: inputNumber, Min: "16", Max: "256", Step: "1", Value: "64"}},
		"tier":       {"string enum: required select", field{Name: "tier", Label: "tier", Type: "string", Input: inputSelect, Enum: []string{"small", "large"}, Required: true}},
		"persistent": {"boolean: checkbox checked by its default", field{Name: "persistent", Label: "persistent", Type: "boolean", Input: inputCheckbox, Checked: true}},
		"label":      {"string: lengths and an anchored pattern", field{Name: "label", Label: "label", Type: "string", Input: inputText, MinLength: "2", MaxLength: "8", Pattern: "^[a-z]+$"}},
		"ratio":      {"number: multipleOf as step", field{Name: "ratio", Label: "ratio", Type: "number", Input: inputNumber, Step: "0.5"}},
		"tags":       {"array: JSON", field{Name: "tags", Label: "tags", Input: inputJSON}},
	} {
		if diff := cmp.Diff(c.want, got[name]); diff != "" {
			t.Errorf("%s: %s -want +got:\n%s", name, c.reason, diff)
		}
	}
}

func TestValidateErrorsNextToFields(t *testing.T) {
	for name, c := range map[string]struct {
		reason string
		values url.Values
		want   map[string]string // field → substring of its error
		ok     bool
	}{
		"valid":            {"every value within the schema", url.Values{"p.tier": {"small"}, "p.maxmemory": {"64"}, "p.label": {"abc"}, "p.tags": {`["x"]`}}, map[string]string{}, true},
		"below minimum":    {"the schema's minimum is named", url.Values{"p.tier": {"small"}, "p.maxmemory": {"8"}}, map[string]string{"maxmemory": "16"}, false},
		"missing required": {"a required field left empty is required", url.Values{"p.maxmemory": {"64"}}, map[string]string{"tier": "required"}, false},
		"not a number":     {"a value of the wrong type never reaches the schema", url.Values{"p.tier": {"small"}, "p.maxmemory": {"lots"}}, map[string]string{"maxmemory": "whole number"}, false},
		"enum and pattern": {"two fields, two errors", url.Values{"p.tier": {"huge"}, "p.label": {"ABC"}}, map[string]string{"tier": "small", "label": "[a-z]"}, false},
		"bad JSON":         {"JSON fields must parse", url.Values{"p.tier": {"small"}, "p.tags": {"[x"}}, map[string]string{"tags": "must be JSON"}, false},
		"nested":           {"an error inside an array names its place", url.Values{"p.tier": {"small"}, "p.tags": {`[1]`}}, map[string]string{"tags": "at /0"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := newForm([]byte(cacheSchema))
			if err != nil {
				t.Fatal(err)
			}
			ok := f.validate(f.fill(c.values))
			if ok != c.ok {
				t.Errorf("%s: valid %v, want %v (fields %+v, errors %v)", c.reason, ok, c.ok, f.Fields, f.Errors)
			}
			for _, fd := range f.Fields {
				want, expected := c.want[fd.Name]
				switch {
				case expected && !strings.Contains(fd.Error, want):
					t.Errorf("%s: field %s error %q, want it to contain %q", c.reason, fd.Name, fd.Error, want)
				case !expected && fd.Error != "":
					t.Errorf("%s: field %s has the unexpected error %q", c.reason, fd.Name, fd.Error)
				}
			}
			if len(f.Errors) > 0 {
				t.Errorf("%s: errors that belong to no field: %v", c.reason, f.Errors)
			}
		})
	}
}

func TestFillBuildsTypedObject(t *testing.T) {
	f, err := newForm([]byte(cacheSchema))
	if err != nil {
		t.Fatal(err)
	}
	got := f.fill(url.Values{"p.tier": {"large"}, "p.maxmemory": {" 32 "}, "p.ratio": {"1.5"}, "p.tags": {`["a","b"]`}, "p.label": {""}, "name": {"ignored"}})
	want := map[string]any{"tier": "large", "maxmemory": int64(32), "ratio": 1.5, "tags": []any{"a", "b"}, "persistent": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("object from the form (empty optional fields left out, an unticked checkbox false) -want +got:\n%s", diff)
	}
}

func TestParseHistogram(t *testing.T) {
	text := `# HELP x_seconds test
# TYPE x_seconds histogram
x_seconds_bucket{kind="A",le="0.1"} 2
x_seconds_bucket{kind="A",le="1"} 5
x_seconds_bucket{kind="A",le="+Inf"} 6
x_seconds_sum{kind="A"} 3.5
x_seconds_count{kind="A"} 6
x_seconds_bucket{kind="B, with le=\"9\"",le="0.1"} 1
x_seconds_bucket{kind="B, with le=\"9\"",le="1"} 1
x_seconds_bucket{kind="B, with le=\"9\"",le="+Inf"} 3
x_seconds_sum{kind="B, with le=\"9\""} 20
x_seconds_count{kind="B, with le=\"9\""} 3
other_bucket{le="0.1"} 100
`
	h, err := parseHistogram(strings.NewReader(text), "x_seconds")
	if err != nil {
		t.Fatal(err)
	}
	inf := h.Buckets[len(h.Buckets)-1].Le
	want := &histogram{Buckets: []bucket{{0.1, 3}, {1, 6}, {inf, 9}}, Count: 9, Sum: 23.5}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("histogram summed over label sets -want +got:\n%s", diff)
	}
	if _, err := parseHistogram(strings.NewReader(text), "missing"); err == nil {
		t.Errorf("a histogram the endpoint lacks: no error")
	}
}

func TestTokenOf(t *testing.T) {
	kc := func(user string) string {
		return "apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n" +
			"clusters:\n- name: c\n  cluster: {server: https://example.invalid}\nusers:\n- name: u\n  user: " + user + "\n"
	}
	for name, c := range map[string]struct {
		token, kubeconfig, want, err string
	}{
		"token":              {token: "abc", want: "abc"},
		"token with a space": {token: "a b", err: "one word"},
		"kubeconfig token":   {kubeconfig: kc("{token: xyz}"), want: "xyz"},
		"kubeconfig cert":    {kubeconfig: kc("{client-certificate-data: Zm9v, client-key-data: Zm9v}"), err: "bearer tokens only"},
		"nothing":            {err: "paste"},
		"garbage":            {kubeconfig: "{{{", err: "cannot be read"},
	} {
		got, err := tokenOf(c.token, c.kubeconfig)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: got %q, %v; want %q, error containing %q", name, got, err, c.want, c.err)
		}
	}
}
