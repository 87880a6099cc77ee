// Package validation proves a service provider healthy by the flow of
// openMCP's provider validation (seed 02): SETUP, request the provider and
// wait for its API and run, consume its ServiceProviderAPI and wait for the
// DomainService and its API, check the DomainServiceAPI, delete and wait
// until the DomainService and its API are gone, TEARDOWN.
//
// A Spec holds what to validate: one ServiceProvider, the objects it needs
// on the platform cluster (its ProviderConfig), optionally a control plane
// (ManagedControlPlane or ControlPlane), and the service objects to create
// on the onboarding cluster. SpecFromFiles reads them from manifests. A
// Target is where the flow runs: Kubeconfigs connects to real clusters
// whose operator deploys the provider; providertest.InProcess starts API
// servers and the operator's process deployer in this process (no
// container runtime needed), providertest.InProcessLandscape runs on such a
// landscape that the caller started once for many flows, and `marketplane
// validate` also connects to a running local landscape. Other packages
// implement Target to run the flow elsewhere.
//
// Run executes the steps in order (see StepIDs) and returns a Report: per
// step what it waited for, how long it took and, for a failed step, the
// object, its last conditions and events and the tail of the provider's
// logs. After a failed step the remaining checks are skipped, while the
// clean-up steps still run. Validate does the same in a Go test and fails
// the test with the report. `marketplane validate` runs the flow from
// manifests and prints the report as a table, JSON or JUnit XML.
package validation
