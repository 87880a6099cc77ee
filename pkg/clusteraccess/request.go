package clusteraccess

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Onboarding obtains access to the onboarding cluster with permissions p:
// Request with purpose onboarding and the name "onboarding-<name>". Use a
// different name for each set of permissions, e.g. "init" (install CRDs)
// and "run" (watch the provider's API): the init identity may create
// requests but not change them.
func (m *Manager) Onboarding(ctx context.Context, name string, p Permissions) (*spruntime.Cluster, error) {
	return m.Request(ctx, clustersv1alpha1.PurposeOnboarding, clustersv1alpha1.PurposeOnboarding+"-"+name, p)
}

// Request obtains access to a cluster of purpose with permissions p and
// blocks until it is granted: it creates the ClusterRequest and the
// AccessRequest RequestName(provider, name) in the provider's namespace
// (an existing AccessRequest is updated to p) and polls them until the
// AccessRequest is granted, at most the Manager's timeout (WithTimeout) or
// until ctx ends. A denied request is an error wrapping ErrAccessDenied; a
// timeout is an error saying what is still pending.
//
// The returned cluster keeps working when the operator refreshes the token:
// its client re-reads the token from the Secret every
// DefaultTokenRefreshInterval (WithTokenRefreshInterval) and after the API
// server rejected it.
func (m *Manager) Request(ctx context.Context, purpose, name string, p Permissions) (*spruntime.Cluster, error) {
	if purpose == "" {
		return nil, errors.New("request cluster access: the purpose is empty")
	}
	if err := validateRequestName(m.provider, name); err != nil {
		return nil, fmt.Errorf("request %s cluster access: %w", purpose, err)
	}
	key := types.NamespacedName{Namespace: m.namespace, Name: RequestName(m.provider, name)}
	log := logf.FromContext(ctx).WithValues("purpose", purpose, "accessRequest", key)
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()

	if _, err := m.ensureClusterRequest(ctx, key, purpose); err != nil {
		return nil, fmt.Errorf("request %s cluster access: %w", purpose, err)
	}
	if _, err := m.ensureAccessRequest(ctx, m.accessRequest(key, key, p, m.labels(purpose, nil))); err != nil {
		return nil, fmt.Errorf("request %s cluster access: %w", purpose, err)
	}

	var cluster *spruntime.Cluster
	pending := noStateYet
	err := wait.PollUntilContextCancel(ctx, m.pollInterval, true, func(ctx context.Context) (bool, error) {
		c, state, err := m.requestedCluster(ctx, key)
		if err != nil && errors.Is(err, ErrAccessDenied) {
			return false, err
		}
		if err != nil {
			// Transient (the API server or the Secret is not there);
			// the next poll tries again. A read cut short because the
			// wait itself ended says nothing about the request: the
			// state read before it is what the caller needs to know.
			if ctx.Err() == nil || pending == noStateYet {
				pending = err.Error()
			}
			return false, nil
		}
		if c == nil {
			pending = state
			return false, nil
		}
		cluster = c
		return true, nil
	})
	switch {
	case errors.Is(err, ErrAccessDenied):
		return nil, fmt.Errorf("request %s cluster access: %w", purpose, err)
	case err != nil:
		return nil, fmt.Errorf("request %s cluster access: not granted within %s (or the context ended): %s", purpose, m.timeout, pending)
	}
	log.V(1).Info("Cluster access granted", "cluster", cluster.Name())
	return cluster, nil
}

// requestedCluster returns the cluster of the request key once it is
// granted, and otherwise what it waits for.
func (m *Manager) requestedCluster(ctx context.Context, key types.NamespacedName) (*spruntime.Cluster, string, error) {
	cr := &clustersv1alpha1.ClusterRequest{}
	if err := m.reader.Get(ctx, key, cr); err != nil {
		return nil, "", fmt.Errorf("get ClusterRequest %s: %w", key, err)
	}
	if err := clusterRequestDenied(cr, "cluster of purpose "+cr.Spec.Purpose); err != nil {
		return nil, "", err
	}
	ar := &clustersv1alpha1.AccessRequest{}
	if err := m.reader.Get(ctx, key, ar); err != nil {
		return nil, "", fmt.Errorf("get AccessRequest %s: %w", key, err)
	}
	secret, granted, err := grantedSecret(ar)
	if err != nil {
		return nil, "", err
	}
	if !granted {
		state := describe(ar)
		if !cr.Status.IsGranted() {
			state = fmt.Sprintf("ClusterRequest %s is %s%s; %s", key, phaseOf(cr.Status.Phase), readyReason(cr.Status.Conditions), state)
		}
		return nil, state, nil
	}
	cfg, _, found, err := m.readKubeconfig(ctx, secret)
	if err != nil {
		return nil, "", err
	}
	if !found {
		return nil, fmt.Sprintf("AccessRequest %s is granted but its Secret %s does not exist (yet)", client.ObjectKeyFromObject(ar), secret), nil
	}
	m.refreshingConfig(cfg, secret)
	name := clusterName(cr)
	if name == "" {
		name = key.Name
	}
	c, err := m.newCluster(name, cfg)
	return c, "", err
}

// noStateYet is what Request reports as pending before its first read.
const noStateYet = "nothing read yet"

func phaseOf(p string) string {
	if p == "" {
		return clustersv1alpha1.RequestPending
	}
	return p
}
