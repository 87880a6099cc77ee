package spruntime

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StaticAccess is a ClusterAccess that gives every object the same clusters
// and has nothing to release. It is for developing a provider without the
// operator (point it at a local API server) and for tests; a deployed
// provider uses package clusteraccess.
type StaticAccess[T API] struct {
	clusters ClusterContext
}

var _ ClusterAccess[API] = &StaticAccess[API]{}

// NewStaticAccess returns a StaticAccess handing out clusters.
func NewStaticAccess[T API](clusters ClusterContext) *StaticAccess[T] {
	return &StaticAccess[T]{clusters: clusters}
}

// Clusters implements ClusterAccess: always the same clusters, always ready.
func (s *StaticAccess[T]) Clusters(context.Context, T) (ClusterContext, bool, error) {
	return s.clusters, true, nil
}

// Release implements ClusterAccess: there is nothing to release.
func (s *StaticAccess[T]) Release(context.Context, T) (bool, error) {
	return true, nil
}

// ClusterFromConfig returns a Cluster with an uncached client for cfg that
// uses scheme.
func ClusterFromConfig(name string, cfg *rest.Config, scheme *runtime.Scheme) (*Cluster, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client for cluster %q: %w", name, err)
	}
	return NewCluster(name, cfg, c), nil
}
