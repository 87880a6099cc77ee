// Package catalog serves the inter-operator's catalog: the SFServices and
// SFPlans in the catalog namespace of the platform cluster.
//
// The Reconciler validates them and reports the result as the Ready
// condition of each: a plan must belong to an existing service (same
// namespace, spec.serviceId equal to the service's spec.id), service ids
// and plan ids are unique in the namespace (and plan names within their
// service), parameter schemas are valid JSON Schema with $schema set, no
// external $ref and at most 64 kB (OSB v2.17), a plan has a provision
// template, and inline gotemplates parse. A valid plan's status.specHash
// is the hash of its spec (SpecHash), which the provisioner records on the
// instances it applied the plan to.
//
// Deregistration (deletion.go): the Reconciler holds its Finalizer on the
// entries instances use, and only on those; an entry being deleted that
// instances of the inter-operator still use stays, Ready=False with ReasonDeletionBlocked naming them, until the
// last one is gone, or the ProviderConfig is.
//
// Plan and Service look up catalog entries by OSB id for the provisioner.
package catalog
