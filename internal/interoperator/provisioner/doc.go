// Package provisioner is the inter-operator's provisioner: it reconciles
// SFServiceInstances and SFServiceBindings on the onboarding cluster by
// rendering their SFPlan's templates (package render) and applying the
// result to the SFCluster the instance is scheduled on (packages clusters
// and apply). It is a service provider built on the provider runtime
// (pkg/spruntime): InstanceReconciler and BindingReconciler implement
// spruntime.Reconciler, InstanceAccess and BindingAccess implement
// spruntime.ClusterAccess, and the runtime owns finalizers, the
// ProviderConfig, conditions, phase, events and requeues.
//
// # Operations and states
//
// status.state is Service Fabrik's: the broker writes in_queue (provision,
// bind), update or delete; the provisioner ends an operation in succeeded
// or failed, and writes "in progress" only when it has applied the
// resources and must wait for the status template to say more. A reconcile
// that finishes the operation writes the final state directly: one status
// write per operation. Terminal states are not reconciled again until the
// spec changes (a new generation), the broker starts a new operation, or,
// for plans with autoUpdateInstances, the plan's spec hash differs from the
// instance's planhash annotation.
//
// # Provision and update
//
// As before every template, as in Service Fabrik, the sources template is
// rendered first and the objects it names are read from the target cluster
// (at a first provision they usually do not exist yet), to be the template's
// variables besides the instance, plan and service. The provision template
// renders the objects; namespaced objects without a namespace get the
// instance's namespace (created on the target cluster if
// missing). Every object gets the label LabelInstanceID, is applied with
// server-side apply (field owner marketplane-interoperator, forced) and
// recorded in status.resources; objects an update no longer renders are
// deleted. Then the sources template names objects on the target cluster,
// which are read and handed to the status template as variables; its
// provision section sets state, description, error, dashboardUrl,
// instanceUsable and updateRepeatable. Without a status template an applied
// instance has succeeded. While the state is "in progress" the sources are
// watched on the target cluster (package sourcewatch, when the Engine has
// a watcher): a change of one of them evaluates the status again at once,
// and an operation whose sources are all watched is looked at without an
// event only every few minutes. Sources that cannot be watched are polled
// with a backoff from one to thirty seconds.
//
// # Bind and unbind
//
// The bind template's objects get LabelInstanceID and LabelBindingID and
// are applied with a field owner of the binding's own, so that a bind
// template may add fields to an object the instance owns. The status
// template's bind section yields the state and the OSB bind response with
// the credentials, which is written to the Secret sf-<binding name> (key
// "response", owned by the binding) in the binding's namespace on the
// onboarding cluster and named by status.response.secretRef. Credentials
// never reach status, conditions, events or logs. Unbind applies the unbind
// template when the plan has one, otherwise deletes the bind resources,
// and deletes the Secret.
//
// # Deprovision
//
// Every object in status.resources is deleted; the instance stays (state
// "in progress") until they are gone, then its state is succeeded and the
// runtime removes its finalizer.
//
// # Errors
//
// A template that does not render, a plan the catalog found invalid,
// objects that cannot be applied (no name, too many) or that the API
// server rejects fail the operation at once:
// state failed, error and description say why, Ready=False, and nothing is
// retried until the object changes. Transient errors (network, server,
// unreachable template urls, unknown kinds) are retried with backoff; after
// the ProviderConfig's limits.maxTransientErrors consecutive ones the
// operation fails too. Missing catalog entries or clusters leave the state
// as it is, set Ready=False with a reason and wait for the catalog or the
// SFClusters to change.
package provisioner
