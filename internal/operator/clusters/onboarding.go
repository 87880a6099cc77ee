package clusters

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// OnboardingFromClusters returns the onboarding cluster as the access
// policy sees it: the first Cluster (by namespace and name) with purpose
// onboarding, through its admin kubeconfig, each request bounded by
// timeout. The policy reads only object metadata there, to find a
// provider's tenants. The client is kept while the kubeconfig stays the
// same: a new one per check would discover the API server's resources again
// on every reconcile of an MCP access.
func OnboardingFromClusters(c client.Reader, timeout time.Duration) policy.OnboardingSource {
	var mu sync.Mutex
	var lastKey string
	var last client.Client
	// clientFor returns the kept client when cfg is the same as last time.
	clientFor := func(cl *clustersv1alpha1.Cluster, cfg *rest.Config) (client.Client, error) {
		key := configKey(cfg)
		mu.Lock()
		defer mu.Unlock()
		if key == lastKey {
			return last, nil
		}
		cfg = rest.CopyConfig(cfg)
		cfg.Timeout = timeout
		oc, err := client.New(cfg, client.Options{})
		if err != nil {
			return nil, fmt.Errorf("client for onboarding Cluster %s/%s: %w", cl.Namespace, cl.Name, err)
		}
		lastKey, last = key, oc
		return oc, nil
	}
	return func(ctx context.Context) (client.Reader, error) {
		list := &clustersv1alpha1.ClusterList{}
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("list Clusters: %w", err)
		}
		slices.SortFunc(list.Items, func(a, b clustersv1alpha1.Cluster) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
		for i := range list.Items {
			cl := &list.Items[i]
			if !slices.Contains(cl.Spec.Purposes, clustersv1alpha1.PurposeOnboarding) {
				continue
			}
			cfg, err := AdminConfig(ctx, c, cl)
			if err != nil {
				return nil, err
			}
			return clientFor(cl, cfg)
		}
		return nil, nil
	}
}

// configKey identifies what a client made from cfg would connect to and
// authenticate with.
func configKey(cfg *rest.Config) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(cfg.Host), cfg.CAData, cfg.CertData, cfg.KeyData, []byte(cfg.BearerToken), []byte(cfg.BearerTokenFile),
		[]byte(cfg.Username), []byte(cfg.Password), []byte(cfg.ServerName), []byte(fmt.Sprint(cfg.Insecure))} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
