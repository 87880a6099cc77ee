// Package catalog serves the inter-operator's catalog, the SFServices and
// SFPlans of the catalog namespace on the platform cluster: the Reconciler
// validates them into each one's Ready condition and a valid plan's
// status.specHash, holds a finalizer on the entries instances use until
// they are gone (deletion.go), and Plan and Service look entries up by OSB
// id for the provisioner. docs/interoperator.md describes the checks.
package catalog
