// Package apiserverprofile holds the kube-apiserver flags of a small
// cluster: one that holds a handful of objects, has no nodes and shares its
// machine with many others. The local landscape runs the clusters it
// provisions for ClusterRequests this way, and pkg/testenv its test
// clusters. Such a cluster serves only the APIs and admission plugins its
// users need; left out are the groups of pods on nodes and their
// scheduling, storage, autoscaling, certificates, dynamic resources, flow
// control and storage migration. docs/landscape.md records what each
// setting saves.
package apiserverprofile

import "strings"

// Groups are the API group versions a small cluster serves
// (--runtime-config=api/all=false plus these): what openMCP providers,
// tenants and the cluster's own controllers use.
var Groups = []string{
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

// DisabledAdmissionPlugins are default admission plugins a small cluster
// does not run: those of APIs it does not serve (RuntimeClass,
// PriorityClass, StorageClass, certificates) — their informers would fail
// forever — and those that only concern pods scheduled to nodes, which a
// small cluster has none of. NamespaceLifecycle, ServiceAccount,
// LimitRanger, PodSecurity, ResourceQuota, DefaultIngressClass, the
// webhooks and the admission policies stay.
var DisabledAdmissionPlugins = []string{
	"RuntimeClass", "Priority",
	"DefaultStorageClass", "StorageObjectInUseProtection", "PersistentVolumeClaimResize",
	"CertificateApproval", "CertificateSigning", "ClusterTrustBundleAttest", "CertificateSubjectRestriction",
	"PodGroupProtection", "PodGroupWorkloadExists", "PodTopologyLabels",
	"NodeDeclaredFeatureValidator", "PodResizeValidator", "TaintNodesByCondition", "DefaultTolerationSeconds",
}

// Args are the kube-apiserver flags of a small cluster, each as
// "--name=value".
func Args() []string {
	groups := make([]string, 0, len(Groups)+1)
	groups = append(groups, "api/all=false")
	for _, g := range Groups {
		groups = append(groups, g+"=true")
	}
	return []string{
		"--runtime-config=" + strings.Join(groups, ","),
		"--disable-admission-plugins=" + strings.Join(DisabledAdmissionPlugins, ","),
		// API Priority and Fairness needs its API group, which is off;
		// the max-in-flight limits protect the server instead, which
		// is enough for the few clients of one small cluster.
		"--enable-priority-and-fairness=false",
		// Each API server polls etcd for object counts and the database
		// size; with many clusters on one machine that is load for
		// metrics nobody scrapes.
		"--etcd-count-metric-poll-period=0",
		"--etcd-db-metric-poll-interval=0",
	}
}
