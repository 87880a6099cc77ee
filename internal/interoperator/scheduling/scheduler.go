package scheduling

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Type names a scheduler. Service Fabrik has default and label-selector;
// the others are Marketplane's.
type Type string

// The schedulers.
const (
	TypeDefault       Type = "default"
	TypeRoundRobin    Type = "round-robin"
	TypeLeastFilled   Type = "least-filled"
	TypeLeastUtilized Type = "least-utilized"
	TypeLabelSelector Type = "label-selector"
)

// Types lists every scheduler type.
var Types = []Type{TypeDefault, TypeRoundRobin, TypeLeastFilled, TypeLeastUtilized, TypeLabelSelector}

// ParseType returns the scheduler type s names; empty is TypeDefault.
func ParseType(s string) (Type, error) {
	if s == "" {
		return TypeDefault, nil
	}
	if t := Type(s); slices.Contains(Types, t) {
		return t, nil
	}
	names := make([]string, len(Types))
	for i, t := range Types {
		names[i] = string(t)
	}
	return "", fmt.Errorf("unknown scheduler type %q; known: %s", s, strings.Join(names, ", "))
}

// Candidate is an SFCluster that may take an instance, with what is placed
// on it already.
type Candidate struct {
	// Name is the SFCluster's name.
	Name string
	// Capacity is how much may be requested on the cluster in all: its
	// total capacity times its schedulingLimitPercentage. Resources it
	// does not list are not limited.
	Capacity corev1.ResourceList
	// Instances is the number of instances placed on the cluster.
	Instances int
	// Requested is the sum of the requests of those instances.
	Requested corev1.ResourceList
}

// shortOf returns the first resource of requests, by name, that does not
// fit into c's free capacity, and says what is requested and what the
// capacity is ("cpu: 2 requested of 2, 1 more asked"); "" when they all
// fit.
func (c Candidate) shortOf(requests corev1.ResourceList) (corev1.ResourceName, string) {
	for _, name := range sortedNames(requests) {
		limit, ok := c.Capacity[name]
		if !ok {
			continue
		}
		want := c.Requested[name].DeepCopy()
		want.Add(requests[name])
		if want.Cmp(limit) > 0 {
			used := c.Requested[name]
			return name, fmt.Sprintf("%s: %s requested of %s, %s more asked", name, used.String(), limit.String(), requests.Name(name, resource.DecimalSI).String())
		}
	}
	return "", ""
}

// utilization returns how full c would be with requests placed on it: the
// largest share of a resource its capacity lists, from 0 to 1 and more.
// ok is false when the capacity lists none of the resources.
func (c Candidate) utilization(requests corev1.ResourceList) (u float64, ok bool) {
	for _, name := range sortedNames(c.Capacity) {
		limit := c.Capacity[name]
		if limit.IsZero() {
			continue
		}
		used := c.Requested[name].DeepCopy()
		used.Add(requests[name])
		if share := used.AsApproximateFloat64() / limit.AsApproximateFloat64(); !ok || share > u {
			u, ok = share, true
		}
	}
	return u, ok
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Request is one placement to decide.
type Request struct {
	// Requests are the plan's context.requests.
	Requests corev1.ResourceList
	// Default is the cluster the default scheduler prefers: the
	// ProviderConfig's defaultCluster or Service Fabrik's
	// primaryClusterId. Empty means none.
	Default string
	// Last is the cluster the round-robin scheduler chose last.
	Last string
}

// Scheduler picks a cluster for an instance among candidates, which are
// sorted by name, not empty, and passed every filter. why explains the
// choice; a NoClusterError says why none fits.
type Scheduler interface {
	Pick(req Request, candidates []Candidate) (name, why string, err error)
}

// For returns the scheduler of type t.
func For(t Type) Scheduler {
	switch t {
	case TypeRoundRobin:
		return roundRobin{}
	case TypeLeastFilled:
		return leastFilled{}
	case TypeLeastUtilized:
		return leastUtilized{}
	case TypeLabelSelector:
		return labelSelector{}
	}
	return defaultScheduler{}
}

// NoClusterError says why no cluster can take an instance now. The
// instance waits until the SFClusters change.
type NoClusterError struct {
	Message string
	// NotReady is set when the one cluster an instance names (Placer.Admit)
	// is not Ready: the instance waits for it to be reachable again.
	NotReady bool
}

// Error implements error.
func (e *NoClusterError) Error() string { return e.Message }

type defaultScheduler struct{}

func (defaultScheduler) Pick(req Request, candidates []Candidate) (string, string, error) {
	if req.Default != "" {
		for _, c := range candidates {
			if c.Name == req.Default {
				return c.Name, "the default cluster", nil
			}
		}
		return "", "", &NoClusterError{Message: fmt.Sprintf("the default SFCluster %s cannot take the instance", req.Default)}
	}
	if len(candidates) == 1 {
		return candidates[0].Name, "the only cluster that can take the instance", nil
	}
	names := make([]string, len(candidates))
	for i, c := range candidates {
		names[i] = c.Name
	}
	return "", "", &NoClusterError{Message: fmt.Sprintf(
		"several SFClusters (%s) can take the instance and the default scheduler has no default cluster; set spec.clusterId, the ProviderConfig's spec.defaultCluster, or another spec.schedulerType",
		strings.Join(names, ", "))}
}

type roundRobin struct{}

func (roundRobin) Pick(req Request, candidates []Candidate) (string, string, error) {
	for _, c := range candidates {
		if c.Name > req.Last {
			return c.Name, fmt.Sprintf("the next cluster after %s", cmp.Or(req.Last, "the start")), nil
		}
	}
	return candidates[0].Name, fmt.Sprintf("the next cluster after %s, from the start", req.Last), nil
}

type leastFilled struct{}

func (leastFilled) Pick(_ Request, candidates []Candidate) (string, string, error) {
	best := candidates[0]
	for _, c := range candidates[1:] {
		if c.Instances < best.Instances {
			best = c
		}
	}
	return best.Name, fmt.Sprintf("the fewest instances (%d) of %d clusters", best.Instances, len(candidates)), nil
}

type leastUtilized struct{}

func (leastUtilized) Pick(req Request, candidates []Candidate) (string, string, error) {
	best, bestU, bestOK := candidates[0], 0.0, false
	for i, c := range candidates {
		u, ok := c.utilization(req.Requests)
		better := i == 0 ||
			(ok && !bestOK) ||
			(ok == bestOK && ok && u < bestU) ||
			(ok == bestOK && (!ok || u == bestU) && c.Instances < best.Instances)
		if better {
			best, bestU, bestOK = c, u, ok
		}
	}
	if !bestOK {
		return best.Name, fmt.Sprintf("no cluster reports its capacity; the fewest instances (%d) of %d clusters", best.Instances, len(candidates)), nil
	}
	return best.Name, fmt.Sprintf("the most free capacity of %d clusters (%.0f%% used with the instance)", len(candidates), bestU*100), nil
}

type labelSelector struct{}

func (labelSelector) Pick(req Request, candidates []Candidate) (string, string, error) {
	if len(req.Requests) == 0 {
		return leastFilled{}.Pick(req, candidates)
	}
	return leastUtilized{}.Pick(req, candidates)
}
