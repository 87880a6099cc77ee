// Package provider is the provider operator's reconciler for the three
// provider kinds of openmcp.cloud/v1alpha1: ServiceProvider, ClusterProvider
// and PlatformService. The kinds differ only in their names, so one generic
// Reconciler serves all three through a small Kind adapter.
//
// For each provider object the reconciler sets up what is common to every
// way of running a provider: its own namespace on the platform cluster, an
// init and a run ServiceAccount with least-privilege RBAC (the run role
// follows the API groups the provider owns, policy.Ownership),
// copies of the image pull secrets, and the contract arguments and
// environment of seed 04. It then hands a deploy.Workload to a
// deploy.Deployer, which runs init once per generation and, after init
// succeeded, the run instances. It reports the outcome in the Initialized,
// Ready and Uninstalled conditions, the phase and observedGeneration, and
// records an event on every condition transition.
//
// Deleting a provider object removes everything the reconciler and the
// Deployer created, in order, and waits until each part is gone before the
// finalizer is dropped. docs/operator.md describes the names, labels and
// permissions.
//
// Decisions docs/operator.md leaves open:
//
//   - While init of a new generation runs (or waits out a failure), the run
//     instances of the previous generation keep running unchanged, so a
//     provider stays available across an upgrade; Ready is False with
//     ProviderInstallationPending until the new init succeeded and the new
//     run instances rolled out.
//   - The verbosity is passed in the contract's upper-case spelling even
//     when the object uses openMCP's lower-case one.
//   - status.resources is the provider's own word: only the API groups the
//     provider owns (policy.Ownership: reserved groups only when
//     spec.accessPolicy.apiGroups lists them, other groups first come, first
//     served) are granted; the rest is reported as ResourcesAccepted=False
//     with a Warning event. Every provider is re-evaluated when any
//     provider's claims change.
//   - The admission policy marketplane-provider-crd-groups (admission.go)
//     lets providers' ServiceAccounts write only CRDs of groups the
//     provider owns or can still claim, which the init role's cluster-wide
//     RBAC on CRDs cannot express.
//   - An object annotated openmcp.cloud/operation: ignore is not touched at
//     all, not even while it is deleted: its finalizer stays until the
//     annotation is removed.
//   - A missing image pull secret is a condition (InitJobCreationFailed),
//     looked for again every 30 seconds, since Secrets are not watched.
package provider
