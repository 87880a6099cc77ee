package clusters

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/marketplane/marketplane/api/common"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// PlanRequests returns what one instance of plan takes from its cluster:
// the plan's spec.context.requests, a map of resource names to quantities
// ({cpu: "1", memory: 1Gi}), as Service Fabrik's capacity-aware scheduler
// reads it. Quantities may be strings or JSON numbers, within the bound
// the API server enforces on every quantity field (common.ParseQuantity):
// the context is free-form, so no schema checked them, and a plan author's
// 1E-99999999 would otherwise keep the scheduler parsing practically
// forever. A plan without context or without requests asks for nothing
// (nil). Requests that are not such a map, or a quantity outside the bound,
// are an error naming the field; the plan's other context is not looked at.
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
// or number (2, 0.5), within common.ParseQuantity's bound.
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
	return common.ParseQuantity(s)
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

// maxStatusResourceNames is how many resource names each resource list of
// an SFCluster's status may hold (its CRD's maxProperties).
const maxStatusResourceNames = 128

// boundForStatus returns l as the SFCluster CRD accepts it in status: a sum
// beyond 2^63-1 (the nodes of a target cluster or the plans of its instances
// can report that much) becomes 2^63-1, and of more than
// maxStatusResourceNames names only the first, in name order, are kept.
// Without it the API server would refuse every status write of the cluster,
// and its Ready condition would go stale.
func boundForStatus(l corev1.ResourceList) corev1.ResourceList {
	if l == nil {
		return nil
	}
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, string(name))
	}
	sort.Strings(names)
	if len(names) > maxStatusResourceNames {
		names = names[:maxStatusResourceNames]
	}
	out := make(corev1.ResourceList, len(names))
	for _, name := range names {
		q := l[corev1.ResourceName(name)]
		if q.Cmp(quantityMaximum) > 0 {
			q = quantityMaximum.DeepCopy()
		}
		out[corev1.ResourceName(name)] = q
	}
	return out
}

// quantityMaximum is the largest quantity an SFCluster's status may hold.
var quantityMaximum = resource.MustParse(common.QuantityMaximum)
