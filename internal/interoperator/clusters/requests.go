package clusters

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// PlanRequests returns what one instance of plan takes from its cluster:
// the plan's spec.context.requests, a map of resource names to quantities
// ({cpu: "1", memory: 1Gi}), as Service Fabrik's capacity-aware scheduler
// reads it. Quantities may be strings or JSON numbers. A plan without
// context or without requests asks for nothing (nil). Requests that are
// not such a map, or a quantity that does not parse, are an error naming
// the field; the plan's other context is not looked at.
func PlanRequests(plan *osbv1alpha1.SFPlan) (corev1.ResourceList, error) {
	if plan == nil || plan.Spec.Context == nil || len(plan.Spec.Context.Raw) == 0 {
		return nil, nil
	}
	var ctx map[string]json.RawMessage
	if err := json.Unmarshal(plan.Spec.Context.Raw, &ctx); err != nil {
		// The API server stores any JSON here; a context that is not an
		// object holds no requests.
		return nil, nil
	}
	raw, ok := ctx["requests"]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("spec.context.requests of SFPlan %s is not a map of resource names to quantities", plan.Name)
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(corev1.ResourceList, len(entries))
	for _, name := range names {
		q, err := parseQuantity(entries[name])
		if err != nil {
			return nil, fmt.Errorf("spec.context.requests.%s of SFPlan %s: %w", name, plan.Name, err)
		}
		out[corev1.ResourceName(name)] = q
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// parseQuantity reads a quantity written as a JSON string ("1Gi", "500m")
// or number (2, 0.5).
func parseQuantity(raw json.RawMessage) (resource.Quantity, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n json.Number
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&n); err != nil {
			return resource.Quantity{}, errors.New(`not a quantity (a string such as "1Gi" or a number)`)
		}
		s = n.String()
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a quantity: %w", s, err)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("%q is negative", s)
	}
	return q, nil
}

// AddResources adds every quantity of add to sum, creating sum when it is
// nil, and returns it.
func AddResources(sum, add corev1.ResourceList) corev1.ResourceList {
	for name, q := range add {
		if sum == nil {
			sum = corev1.ResourceList{}
		}
		total := sum[name].DeepCopy()
		total.Add(q)
		sum[name] = total
	}
	return sum
}
