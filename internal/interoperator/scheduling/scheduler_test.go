package scheduling

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestPick(t *testing.T) {
	a := Candidate{Name: "a", Instances: 3, Capacity: list("cpu", "10"), Requested: list("cpu", "2")}
	b := Candidate{Name: "b", Instances: 1, Capacity: list("cpu", "4"), Requested: list("cpu", "3")}
	c := Candidate{Name: "c", Instances: 2, Capacity: list("cpu", "8"), Requested: list("cpu", "1")}
	unknown := Candidate{Name: "d", Instances: 0}
	tests := map[string]struct {
		reason     string
		typ        Type
		req        Request
		candidates []Candidate
		want       string
		wantNone   bool
	}{
		"DefaultNamed":        {"The default scheduler takes the default cluster.", TypeDefault, Request{Default: "b"}, []Candidate{a, b, c}, "b", false},
		"DefaultFiltered":     {"A default cluster that was filtered out is not replaced by another.", TypeDefault, Request{Default: "z"}, []Candidate{a, b}, "", true},
		"DefaultOnly":         {"Without a default the only cluster is taken.", TypeDefault, Request{}, []Candidate{c}, "c", false},
		"DefaultSeveral":      {"Without a default and with several clusters the default scheduler does not guess.", TypeDefault, Request{}, []Candidate{a, b}, "", true},
		"RoundRobinStart":     {"Round-robin starts with the first cluster by name.", TypeRoundRobin, Request{}, []Candidate{a, b, c}, "a", false},
		"RoundRobinNext":      {"Round-robin continues after the last cluster.", TypeRoundRobin, Request{Last: "a"}, []Candidate{a, b, c}, "b", false},
		"RoundRobinWrap":      {"After the last name round-robin starts over.", TypeRoundRobin, Request{Last: "c"}, []Candidate{a, b, c}, "a", false},
		"RoundRobinGone":      {"A last cluster that is gone (or filtered) is skipped by name order.", TypeRoundRobin, Request{Last: "bb"}, []Candidate{a, b, c}, "c", false},
		"LeastFilled":         {"Least-filled takes the cluster with the fewest instances.", TypeLeastFilled, Request{}, []Candidate{a, b, c}, "b", false},
		"LeastFilledTie":      {"Ties go to the first name.", TypeLeastFilled, Request{}, []Candidate{c, {Name: "e", Instances: 2}}, "c", false},
		"LeastUtilized":       {"Least-utilized takes the cluster with the smallest share used after placing.", TypeLeastUtilized, Request{Requests: list("cpu", "1")}, []Candidate{a, b, c}, "c", false},
		"LeastUtilizedKnown":  {"A cluster with known capacity ranks before one without.", TypeLeastUtilized, Request{Requests: list("cpu", "1")}, []Candidate{unknown, b}, "b", false},
		"LeastUtilizedNone":   {"Without any capacity the fewest instances win.", TypeLeastUtilized, Request{}, []Candidate{{Name: "x", Instances: 5}, {Name: "y", Instances: 1}}, "y", false},
		"LabelSelectorNoReq":  {"Service Fabrik's label-selector takes the fewest instances without requests.", TypeLabelSelector, Request{}, []Candidate{a, b, c}, "b", false},
		"LabelSelectorWithRq": {"With requests it takes the most free capacity.", TypeLabelSelector, Request{Requests: list("cpu", "1")}, []Candidate{a, b, c}, "c", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, why, err := For(tc.typ).Pick(tc.req, tc.candidates)
			var none *NoClusterError
			if tc.wantNone {
				if !errors.As(err, &none) {
					t.Fatalf("%s\nPick() = %q, %v; want a NoClusterError", tc.reason, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%s\nPick() = %q (%s), %v; want %q", tc.reason, got, why, err, tc.want)
			}
			if why == "" {
				t.Errorf("%s\nPick() gives no reason", tc.reason)
			}
		})
	}
}

func TestShortOf(t *testing.T) {
	c := Candidate{Name: "a", Capacity: list("cpu", "4", "memory", "8Gi"), Requested: list("cpu", "3")}
	if _, s := c.shortOf(list("cpu", "1")); s != "" {
		t.Errorf("the last free cpu does not fit: %s", s)
	}
	if _, s := c.shortOf(list("cpu", "1500m")); s == "" {
		t.Error("1.5 cpu fit into 1 free cpu")
	}
	if _, s := c.shortOf(list("memory", "9Gi")); s == "" {
		t.Error("9Gi fit into 8Gi")
	}
	if _, s := c.shortOf(list("nvidia.com/gpu", "1")); s != "" {
		t.Errorf("a resource the capacity does not list is limited: %s", s)
	}
}

func TestParseType(t *testing.T) {
	for _, typ := range Types {
		if got, err := ParseType(string(typ)); err != nil || got != typ {
			t.Errorf("ParseType(%q) = %q, %v", typ, got, err)
		}
	}
	if got, err := ParseType(""); err != nil || got != TypeDefault {
		t.Errorf(`ParseType("") = %q, %v; want default`, got, err)
	}
	if _, err := ParseType("random"); err == nil {
		t.Error("an unknown scheduler type was accepted")
	}
}
