package controlplane

import "github.com/marketplane/marketplane/pkg/apiserverprofile"

// The small profile is how the clusters the local cluster provider creates
// for ClusterRequests (MCP and dedicated clusters; see Cluster.Small) run:
// many of them share one machine, each holds a handful of objects and has
// no nodes, so their API servers serve only the APIs and admission plugins
// such a cluster uses and their Go runtimes return memory sooner. The
// landscape's own clusters (platform, onboarding, workload) keep the
// defaults. docs/landscape.md records each setting and what it saved.

// smallAPIServerArgs are the flags a small cluster's kube-apiserver gets
// besides the common ones: those of apiserverprofile, which the test
// clusters of pkg/testenv run with too.
func smallAPIServerArgs() []string { return apiserverprofile.Args() }

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
