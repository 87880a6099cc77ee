// Package scaffold writes a new service provider project: the
// `marketplane scaffold provider` command. The project builds on the
// service provider runtime (pkg/spruntime, pkg/clusteraccess,
// pkg/providerapp) and holds
//
//   - api/v1alpha1: the ServiceProviderAPI kind (with the common status and
//     the spruntime.API methods) and the cluster-scoped ProviderConfig,
//     their deepcopy code, and api/crds with their CRDs embedded, labelled
//     openmcp.cloud/cluster onboarding and platform;
//   - internal/controller: the sample domain logic (it installs a
//     DomainServiceAPI CRD into the tenant's MCP cluster, reports drift,
//     blocks deletion while tenants have objects of it, removes it on
//     delete; optionally a namespace per object in a workload cluster), the
//     least-privilege permissions it needs, the Setup shared by main and the
//     tests, and integration tests against an in-process landscape
//     (pkg/providertest);
//   - cmd/<name>: the binary with init and run (pkg/providerapp);
//   - go.mod, Makefile, README.
//
// The deepcopy code and the CRD manifests are rendered from templates to
// exactly what controller-gen (the version the project's Makefile pins)
// generates from the types, so that the project builds without running a
// generator and `make generate` changes nothing.
//
// NewProject validates the options and renders every file in memory;
// Project.Write writes them and refuses to overwrite anything.
package scaffold
