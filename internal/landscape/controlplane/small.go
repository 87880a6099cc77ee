package controlplane

import "strings"

// The small profile is how the clusters the local cluster provider creates
// for ClusterRequests (MCP and dedicated clusters; see Cluster.Small) run:
// many of them share one machine, each holds a handful of objects and has
// no nodes, so their API servers serve only the APIs and admission plugins
// such a cluster uses and their Go runtimes return memory sooner. The
// landscape's own clusters (platform, onboarding, workload) keep the
// defaults. docs/landscape.md records each setting and what it saved.

// SmallAPIGroups are the API group versions a small cluster serves
// (--runtime-config=api/all=false plus these): what openMCP providers,
// tenants and the cluster's own controllers use. Left out are the groups
// of pods on nodes and their scheduling, storage, autoscaling,
// certificates, dynamic resources, flow control and storage migration.
var SmallAPIGroups = []string{
	"v1",
	"apps/v1",
	"batch/v1",
	"policy/v1",
	"rbac.authorization.k8s.io/v1",
	"apiextensions.k8s.io/v1",
	// The aggregator is part of every kube-apiserver; its own API stays.
	"apiregistration.k8s.io/v1",
	// Leases: leader election of providers and controllers.
	"coordination.k8s.io/v1",
	// TokenReview, SubjectAccessReview, SelfSubjectReview.
	"authentication.k8s.io/v1",
	"authorization.k8s.io/v1",
	// Webhooks and admission policies of the tenant's and providers'
	// operators.
	"admissionregistration.k8s.io/v1",
	"events.k8s.io/v1",
	"discovery.k8s.io/v1",
	// The Service IP allocator keeps IPAddress objects; without the
	// group the API server does not start.
	"networking.k8s.io/v1",
}

// SmallDisabledAdmissionPlugins are default admission plugins a small
// cluster does not run: those of APIs it does not serve (RuntimeClass,
// PriorityClass, StorageClass, certificates) — their informers would fail
// forever — and those that only concern pods scheduled to nodes, which a
// small cluster has none of. NamespaceLifecycle, ServiceAccount,
// LimitRanger, PodSecurity, ResourceQuota, DefaultIngressClass, the
// webhooks and the admission policies stay.
var SmallDisabledAdmissionPlugins = []string{
	"RuntimeClass", "Priority",
	"DefaultStorageClass", "StorageObjectInUseProtection", "PersistentVolumeClaimResize",
	"CertificateApproval", "CertificateSigning", "ClusterTrustBundleAttest", "CertificateSubjectRestriction",
	"PodGroupProtection", "PodGroupWorkloadExists", "PodTopologyLabels",
	"NodeDeclaredFeatureValidator", "PodResizeValidator", "TaintNodesByCondition", "DefaultTolerationSeconds",
}

// smallAPIServerArgs are the flags a small cluster's kube-apiserver gets
// besides the common ones.
func smallAPIServerArgs() []string {
	groups := make([]string, 0, len(SmallAPIGroups)+1)
	groups = append(groups, "api/all=false")
	for _, g := range SmallAPIGroups {
		groups = append(groups, g+"=true")
	}
	return []string{
		"--runtime-config=" + strings.Join(groups, ","),
		"--disable-admission-plugins=" + strings.Join(SmallDisabledAdmissionPlugins, ","),
		// API Priority and Fairness needs its API group, which is off;
		// the max-in-flight limits protect the server instead, which
		// is enough for the few clients of one tenant's cluster.
		"--enable-priority-and-fairness=false",
		// Each API server polled etcd for object counts and the database
		// size; with many clusters on one etcd that is load for metrics
		// nobody scrapes.
		"--etcd-count-metric-poll-period=0",
		"--etcd-db-metric-poll-interval=0",
	}
}

// SmallAPIServerEnv is the Go runtime setting of a small cluster's API
// server: collect garbage when the heap has grown by a quarter instead of
// doubling. An idle small API server keeps about 64 MiB alive; this cuts
// its resident memory by about 45 MiB for some 0.6 s more CPU while it
// starts and no measurable CPU when idle. It scales with the heap, unlike
// a GOMEMLIMIT: a limit near the live heap (100 MiB) made the collector
// run without pause (a whole core per idle API server), and a cluster that
// grows (many CRDs) would cross any fixed limit. kube-controller-manager
// gets nothing: its heap is about 10 MiB; the rest of its resident memory
// is the Go runtime and its binary's pages, shared by all of them.
var SmallAPIServerEnv = []string{"GOGC=25"}

// Small reports whether the cluster runs the small profile: it does when
// the local cluster provider created it for a ClusterRequest.
func (c *Cluster) Small() bool { return c.Request != nil }
