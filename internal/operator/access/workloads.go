package access

import (
	"context"
	"fmt"
	"slices"
	"strings"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
)

// workloadResources are the resources that run Pods, by API group: on a
// Cluster without workloads, a request naming one of them can never work.
var workloadResources = map[string][]string{
	"":      {"pods"},
	"apps":  {"deployments", "replicasets", "statefulsets", "daemonsets"},
	"batch": {"jobs", "cronjobs"},
}

// checkWorkloads denies a request whose permissions name workload resources
// on a Cluster annotated as running none (a kcp workspace). Anything granted
// before is revoked first, as for a policy denial. A "*" resource names
// none: it grants what the cluster serves, and there that is no workload.
func (r *Reconciler) checkWorkloads(ctx context.Context, s *grantScope) (*outcome, error) {
	if s.cluster.Annotations[clusters.WorkloadsAnnotation] != clusters.WorkloadsNone {
		return nil, nil
	}
	named := namedWorkloads(s.ar.Spec.Token)
	if len(named) == 0 {
		return nil, nil
	}
	if o, err := r.revoke(ctx, s.ar); o != nil || err != nil {
		return o, err
	}
	s.ar.Status.SecretRef = nil
	logf.FromContext(ctx).V(1).Info("Denied: workloads on a cluster without workloads", "cluster", s.clusterKey, "resources", named)
	return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonWorkloadsNotSupported,
		message: fmt.Sprintf("Cluster %s %s: it runs no Pods or Deployments, yet the request asks for %s; run the domain service on a workload cluster",
			s.clusterKey, backendText(s.cluster.Annotations[clusters.BackendAnnotation]), strings.Join(named, ", "))}, nil
}

// backendText says what a Cluster of backend is.
func backendText(backend string) string {
	switch backend {
	case "":
		return "runs no workloads"
	case "kcp":
		return "is a kcp workspace"
	}
	return fmt.Sprintf("is served by %s", backend)
}

// namedWorkloads returns the workload resources ("resource.group", subresources
// included) that the token's permissions name, sorted and without
// duplicates.
func namedWorkloads(token *clustersv1alpha1.TokenConfig) []string {
	if token == nil {
		return nil
	}
	var out []string
	for _, p := range token.Permissions {
		for _, rule := range p.Rules {
			for _, res := range rule.Resources {
				base, _, _ := strings.Cut(res, "/")
				for _, g := range rule.APIGroups {
					out = append(out, workloadsIn(g, base)...)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// workloadsIn returns resource as "resource.group" for each group it is a
// workload resource of; group "*" stands for every group.
func workloadsIn(group, resource string) []string {
	var out []string
	for g, resources := range workloadResources {
		if (group == g || group == "*") && slices.Contains(resources, resource) {
			out = append(out, strings.TrimSuffix(resource+"."+g, "."))
		}
	}
	return out
}
