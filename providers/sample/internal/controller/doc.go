// Package controller is the domain logic of the sample service provider:
// what it does for each Sample. The service provider runtime (package
// spruntime of github.com/marketplane/marketplane) does the rest: finalizers, the
// ProviderConfig, access to the tenant's clusters, status, events, metrics,
// requeues and the openmcp.cloud annotations.
//
// The sample logic installs a DomainServiceAPI into the tenant's MCP
// cluster: the CRD
//
//	sampleobjects.domain.sample.services.openmcp.cloud (kind SampleObject)
//
// It also keeps a namespace per Sample in the shared workload cluster.
// It reports drift when the CRD is missing or changed, blocks deletion while
// the tenant still has SampleObject objects, and removes the CRD on delete.
// Replace it with your service; the shape (the desired state, Observe,
// CreateOrUpdate, UserResources, Delete) stays.
package controller
