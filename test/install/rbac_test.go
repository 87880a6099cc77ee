package install

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// notReached are the permissions the chart grants the operator that
// TestOperatorInCluster does not use, keyed "verb resource.group" (as
// grant.use names them), each with the code that needs it and why the
// scenario (a provider of each kind installed and removed, one workload
// Cluster granted to one ClusterRequest, no onboarding cluster, so no
// ManagedControlPlane and no AccessRequest) does not get there. Anything else
// granted and unused fails the test: remove it from the chart, or add the
// scenario that uses it, or an entry here.
var notReached = map[string]string{
	// Checked by the API server, never requested: RBAC's escalation
	// prevention asks for escalate when the operator writes a role with
	// rules it does not hold itself, and for bind when it binds one
	// (provider roles with read on every resource of the provider's API
	// groups, internal/operator/provider/rbac.go; the requests Role of
	// internal/operator/mcpaccess). Authorization checks are not requests:
	// the audit log cannot show them. Without them, the patches of those
	// roles are refused (and the test fails on the refusal).
	"escalate clusterroles.rbac.authorization.k8s.io": "authorization check of role writes (see above)",
	"escalate roles.rbac.authorization.k8s.io":        "authorization check of role writes (see above)",
	"bind clusterroles.rbac.authorization.k8s.io":     "authorization check of binding writes (see above)",
	"bind roles.rbac.authorization.k8s.io":            "authorization check of binding writes (see above)",
	// Also checked, not requested: a ValidatingAdmissionPolicy with a
	// paramKind may only be created by a user who may get every object of
	// that kind (kube-apiserver, validatingadmissionpolicy/authz.go, Name
	// and Namespace "*"). The operator's admission policies
	// marketplane-provider-crd-groups and -mcp-requests take ConfigMaps.
	"get configmaps": "authorization check of the creation of the admission policies (paramKind ConfigMap)",

	// The initial list of an informer: client-go (>= 1.35, WatchListClient)
	// streams it as a watch with sendInitialEvents, so only "watch" is
	// requested; it falls back to "list" where the API server does not
	// stream lists.
	"list deployments.apps":                       "informer's initial list, streamed as a watch",
	"list jobs.batch":                             "informer's initial list, streamed as a watch",
	"list namespaces":                             "informer's initial list, streamed as a watch",
	"list roles.rbac.authorization.k8s.io":        "informer's initial list, streamed as a watch",
	"list rolebindings.rbac.authorization.k8s.io": "informer's initial list, streamed as a watch",
	"list accessrequests.clusters.openmcp.cloud":  "informer's initial list, streamed as a watch",
	"list clusterrequests.clusters.openmcp.cloud": "informer's initial list, streamed as a watch",

	// Init creates a CRD only when it is missing (pkg/crdinstall.Apply,
	// server-side apply): here Helm's crds/ created them all first, as on
	// every `helm install`; `--skip-crds` or an upgrade that adds a CRD
	// needs it.
	"create customresourcedefinitions.apiextensions.k8s.io": "init on a cluster without the CRD (helm --skip-crds, a new CRD in an upgrade)",

	// An event recorder patches an event that repeats (its series count);
	// no event repeats in the scenario.
	"patch events":               "event recorder, repeated event",
	"patch events.events.k8s.io": "event recorder, repeated event",

	// ClusterRequests: created and deleted by the ManagedControlPlane
	// controller (internal/operator/mcp/cluster.go, deletion.go), which
	// starts only once an onboarding Cluster is registered (the scenario's
	// ClusterRequest is created by the test, as a provider would).
	"create clusterrequests.clusters.openmcp.cloud": "ManagedControlPlane controller: no onboarding cluster",
	"delete clusterrequests.clusters.openmcp.cloud": "ManagedControlPlane controller: no onboarding cluster",
	"get clusterrequests.clusters.openmcp.cloud":    "ManagedControlPlane controller's uncached reads (mcp/namespace.go): no onboarding cluster",

	// AccessRequests: created, updated (token rotation) and deleted by the
	// ManagedControlPlane controller (internal/operator/mcp/access.go);
	// finalizer, status and the kubeconfig Secret with its reader Role and
	// RoleBinding by the AccessRequest controller
	// (internal/operator/access/controller.go, secretreader.go, which
	// create or update).
	"create accessrequests.clusters.openmcp.cloud":       "ManagedControlPlane controller: no onboarding cluster",
	"update accessrequests.clusters.openmcp.cloud":       "ManagedControlPlane controller's token rotation: no onboarding cluster",
	"delete accessrequests.clusters.openmcp.cloud":       "ManagedControlPlane controller: no onboarding cluster",
	"patch accessrequests.clusters.openmcp.cloud":        "AccessRequest controller's finalizer: no AccessRequest",
	"patch accessrequests/status.clusters.openmcp.cloud": "AccessRequest controller's status: no AccessRequest",
	"update secrets":                                "AccessRequest controller, kubeconfig Secret on token rotation: no AccessRequest",
	"update roles.rbac.authorization.k8s.io":        "AccessRequest controller, Secret-reader Role: no AccessRequest",
	"update rolebindings.rbac.authorization.k8s.io": "AccessRequest controller, Secret-reader RoleBinding: no AccessRequest",

	// The profile provisioner (internal/operator/clusters/profileprovisioner.go)
	// reads the ClusterProfile and creates a Cluster of it; the chart passes
	// no --cluster-profile by default.
	"create clusters.clusters.openmcp.cloud":       "profile provisioner: no --cluster-profile",
	"get clusterprofiles.clusters.openmcp.cloud":   "profile provisioner: no --cluster-profile",
	"list clusterprofiles.clusters.openmcp.cloud":  "profile provisioner's informer: no --cluster-profile",
	"watch clusterprofiles.clusters.openmcp.cloud": "profile provisioner's informer: no --cluster-profile",
}

// use names a grant's verb and resource as notReached keys do.
func (g grant) use() string {
	return g.Verb + " " + groupResource(g.Group, g.Resource)
}

// checkRBACAsUsed checks the operator's requests against what the chart
// grants it, with notReached (checkComponentRBACAsUsed).
func checkRBACAsUsed(t *testing.T, oc *operatorChart, requests []auditRequest, complete bool) {
	checkComponentRBACAsUsed(t, oc, requests, notReached, complete)
}

// checkComponentRBACAsUsed checks a component's requests against what the
// chart grants it: none denied, every grant used or in unreached (and
// every entry of unreached still granted and unused). The second check
// needs the whole scenario (complete): after a failed one, most grants are
// unused only because the component got no further, which would hide the
// cause.
func checkComponentRBACAsUsed(t *testing.T, oc *operatorChart, requests []auditRequest, unreached map[string]string, complete bool) {
	if len(requests) == 0 {
		t.Fatalf("the audit log holds no request of the %s's ServiceAccount", oc.Component)
	}
	t.Logf("requests of the %s's ServiceAccount (resource, verb, count):\n%s", oc.Component, usageTable(requests))

	// (a) Every request the component made is granted by the chart: none
	// was forbidden, and none was refused for a permission the API server
	// checks while validating an object (a ValidatingAdmissionPolicy's
	// paramKind needs "get" on every object of that kind, a role's rules
	// need escalate or the rules themselves): those are 422 Invalid with a
	// field error "Forbidden: ... permission".
	denied := map[string]int{}
	for _, r := range requests {
		if r.Code == 403 || r.Decision == "forbid" || (r.Code == 422 && strings.Contains(r.Message, "Forbidden") && strings.Contains(r.Message, "permission")) {
			denied[fmt.Sprintf("%s: %d %s %s", r, r.Code, r.Decision, r.Message)]++
		}
	}
	for _, d := range sortedKeys(denied) {
		t.Errorf("denied (%d times): %s", denied[d], d)
	}

	// (b) Every permission the chart grants is used (or listed).
	if !complete {
		t.Log("the scenario failed: not checking that every permission granted was used")
		return
	}
	grants, nonResource := oc.grants()
	for _, nr := range nonResource {
		t.Errorf("the %s is granted the non-resource URL %s, which it never requests", oc.Component, nr)
	}
	unused := map[string][]string{}
	used := map[string]bool{}
	for _, g := range grants {
		n := 0
		for _, r := range requests {
			if g.matches(r) {
				n++
			}
		}
		if n > 0 {
			used[g.use()] = true
			continue
		}
		unused[g.use()] = append(unused[g.use()], g.key()+" from "+g.From)
	}
	for _, use := range sortedKeys(unused) {
		if used[use] {
			continue // granted twice, used through the other grant
		}
		if _, ok := unreached[use]; ok {
			continue
		}
		t.Errorf("granted but never used: %s", strings.Join(unused[use], "; "))
	}
	for use := range unreached {
		switch {
		case used[use]:
			// Some entries depend on timing (an event that repeats, a
			// list the API server did not stream): used in this run is
			// no reason to fail, only to say so.
			t.Logf("notReached lists %q, which this run used", use)
		case unused[use] == nil:
			t.Errorf("notReached lists %q (%s), which the chart does not grant: if the code still needs it, the chart lacks it; otherwise remove the entry", use, unreached[use])
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
