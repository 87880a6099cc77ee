// Package mcpaccess gives ServiceProviders what openMCP's clusteraccess
// library needs in the platform namespaces of ManagedControlPlanes
// (mcp--<uuid>), without cluster-admin (issue #11): in every such namespace
// a Role and a RoleBinding for the run ServiceAccount of every
// ServiceProvider (get on the namespace itself; create, get, list, watch,
// update, patch and delete on ClusterRequests and AccessRequests; nothing on
// Secrets), and a ValidatingAdmissionPolicy, served by the platform API
// server, that lets a provider's ServiceAccounts write only requests that
// carry their own provider's name in the label openmcp.cloud/managed-by and
// do not take the MCP's own request names. The AccessRequest and
// ClusterRequest controllers then police each request with the policy of
// the provider the label names (internal/operator/policy, RequesterFor),
// and the AccessRequest controller lets only that provider read the
// request's kubeconfig Secret.
package mcpaccess
