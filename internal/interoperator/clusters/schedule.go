package clusters

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// Schedule returns the SFCluster, in namespace, for an instance that names
// none: defaultCluster when it is set, otherwise the only schedulable
// SFCluster of the namespace. No SFCluster, a cordoned or missing default,
// or several SFClusters and no default are an *Error with reason
// ReasonNoClusterAvailable.
func Schedule(ctx context.Context, reader client.Reader, namespace, defaultCluster string) (string, error) {
	list := &resourcev1alpha1.SFClusterList{}
	if err := reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return "", fmt.Errorf("list SFClusters in %s: %w", namespace, err)
	}
	var schedulable []string
	for i := range list.Items {
		c := &list.Items[i]
		if c.DeletionTimestamp != nil || c.Spec.Unschedulable {
			continue
		}
		if defaultCluster != "" && c.Name == defaultCluster {
			return c.Name, nil
		}
		schedulable = append(schedulable, c.Name)
	}
	switch {
	case defaultCluster != "":
		return "", &Error{Reason: ReasonNoClusterAvailable, Message: fmt.Sprintf("the default SFCluster %s does not exist in namespace %s or is cordoned", defaultCluster, namespace)}
	case len(schedulable) == 1:
		return schedulable[0], nil
	case len(schedulable) == 0:
		return "", &Error{Reason: ReasonNoClusterAvailable, Message: fmt.Sprintf("there is no schedulable SFCluster in namespace %s", namespace)}
	}
	return "", &Error{Reason: ReasonNoClusterAvailable, Message: fmt.Sprintf(
		"namespace %s has several SFClusters (%s) and the ProviderConfig names no defaultCluster; set spec.clusterId or spec.defaultCluster",
		namespace, strings.Join(schedulable, ", "))}
}
