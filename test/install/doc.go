// Package install holds the tests of Marketplane as the Helm chart
// (charts/marketplane) installs it on a real cluster.
//
// TestOperatorInCluster runs the marketplane-operator binary the way the
// chart's operator Deployment runs it in a pod: with the chart's arguments,
// no kubeconfig, KUBERNETES_SERVICE_HOST and _PORT pointing at a real API
// server, and the ServiceAccount's token, CA and namespace files where
// client-go looks for them, provided in a private mount namespace (the
// host's /var/run is never written). It has only the chart's CRDs and the
// chart's RBAC for the operator, and shows that the operator installs,
// reports Ready and removes a provider of each kind (a ServiceProvider with
// an image pull Secret, a ClusterProvider, a PlatformService) with the
// Kubernetes deployer (the test plays the kubelet and the Job and
// Deployment controllers), grants a registered workload Cluster to a
// ClusterRequest and deletes the Cluster with its last request, and serves
// /metrics to a scraper the platform authorizes.
//
// The API server writes an audit log meanwhile, from which the test shows
// that the chart's RBAC for the operator is what the operator uses: no
// request of its ServiceAccount was denied, every permission granted was
// used (or is on a list naming the code path that needs it and why the
// scenario does not reach it), and nothing is granted by wildcard or
// cluster-admin. TestConfigRBACMatchesChart checks that the plain
// manifests in config/ grant what the chart grants.
//
// TestOperatorInCluster builds the operator and starts an API server: `go
// test -short` skips it.
package install
