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
// TestBrokerInCluster does the same for marketplane-broker: the chart's
// broker Deployment's arguments (only --tombstone-ttl added, so that the
// reaper runs within the test), its RBAC and credentials Secret, the
// platform cluster as the onboarding cluster (the default values). It
// drives the OSB API as a platform with the Secret's credentials (catalog,
// provision, last_operation, bind, fetch, unbind, deprovision), the test
// playing the inter-operator's provisioner (finalizer, status, bind
// response Secret), scrapes the broker's metrics, and checks the broker's
// RBAC against the audit log in the same way.
//
// TestInterOperatorInCluster deploys the chart's inter-operator through the
// operator (in-cluster, as above), runs the marketplane-interoperator binary
// as the operator's init Job and run Deployment would (their arguments,
// environment and ServiceAccount tokens), and lets it provision, bind,
// unbind and deprovision an instance. Its two ServiceAccounts are checked
// against the audit log: nothing refused; every rule of the chart's
// interoperator-rbac.yaml used (or listed with its reason), without
// wildcard or cluster-admin; what the operator grants every provider by
// the provider contract and the inter-operator leaves unused is listed in
// the test's log.
//
// TestMarketplaceInCluster does the same for the marketplace PlatformService
// (marketplane-marketplace as the operator's init Job and run Deployment,
// with only the chart's RBAC), and shows that a tenant without bindings
// reads the Offering it keeps.
//
// TestConsoleInCluster runs `marketplane console` with the arguments of the
// chart's console Deployment (default values, and an onboarding kubeconfig
// Secret) and no ServiceAccount token, as its pod has none: a tenant signs
// in with their own token and sees their namespace and the offerings, not
// another namespace; a token the API server refuses gets no session.
//
// TestOperatorInCluster, TestBrokerInCluster and TestInterOperatorInCluster
// also check the scrape against the chart's PrometheusRule and Grafana
// dashboard: every metric they read from that component has a series.
//
// These tests build their binary and start an API server: `go test -short`
// skips them.
package install
