package app

import (
	"fmt"
	"os"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"

	"github.com/marketplane/marketplane/test/openmcp-compat/api/v1alpha1"
)

// EnvShape names the environment variable (set in the ServiceProvider's
// spec.env) that chooses whose requests the provider makes: ShapeTemplate
// (the default) or ShapeVelero.
const EnvShape = "COMPAT_PROVIDER_SHAPE"

// The shapes: what openMCP's service-provider-template (94af197) and
// service-provider-velero (b26ea3d) ask for, from their main.go.
const (
	ShapeTemplate = "template"
	ShapeVelero   = "velero"
)

// VeleroControllerName is the name Velero gives its clusteraccess
// reconciler whatever its --provider-name: its MCP and workload requests
// are labelled openmcp.cloud/managed-by=velero, so its ServiceProvider must
// be named so.
const VeleroControllerName = "velero"

// shape is what a provider asks for and how it waits.
type shape struct {
	name string
	// manager names the clusteraccess.Manager of the onboarding requests
	// (their names and managed-by label).
	manager string
	// initRules and runRules are asked for on the onboarding cluster.
	initRules, runRules []rbacv1.PolicyRule
	// interval and timeout are the manager's wait for a request; retry is
	// the clusteraccess reconciler's.
	interval, timeout, retry time.Duration
}

var all = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}

// shapeFromEnv returns the shape EnvShape names.
func shapeFromEnv() (shape, error) {
	switch name := os.Getenv(EnvShape); name {
	case "", ShapeTemplate:
		return shape{
			name: ShapeTemplate,
			// The template's is its API group.
			manager: v1alpha1.GroupVersion.Group,
			initRules: []rbacv1.PolicyRule{
				{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"*"}},
			},
			runRules: []rbacv1.PolicyRule{
				{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}},
			},
			interval: 10 * time.Second, timeout: 30 * time.Minute, retry: 10 * time.Second,
		}, nil
	case ShapeVelero:
		return shape{
			name: ShapeVelero,
			// Velero's is velero.velero.services.openmcp.cloud.
			manager:   VeleroControllerName + "." + v1alpha1.GroupVersion.Group,
			initRules: all,
			runRules:  all,
			interval:  10 * time.Second, timeout: 30 * time.Minute, retry: 10 * time.Second,
		}, nil
	default:
		return shape{}, fmt.Errorf("%s=%q: want %s or %s", EnvShape, name, ShapeTemplate, ShapeVelero)
	}
}

// veleroMCPRules and veleroWorkloadRules are what Velero asks for on each
// tenant's control plane and on the workload cluster, cluster-wide.
func veleroMCPRules() []clustersv1alpha1.PermissionsRequest {
	return []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "serviceaccounts"}, Verbs: []string{rbacv1.VerbAll}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{rbacv1.VerbAll}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{rbacv1.VerbAll}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: []string{rbacv1.VerbAll}},
	}}}
}

func veleroWorkloadRules() []clustersv1alpha1.PermissionsRequest {
	return []clustersv1alpha1.PermissionsRequest{{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "secrets", "serviceaccounts"}, Verbs: []string{rbacv1.VerbAll}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{rbacv1.VerbAll}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: []string{rbacv1.VerbAll}},
	}}}
}
