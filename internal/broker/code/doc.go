// Package code is the OSB backend of code-based offerings (ServiceProviders
// that opted into OSB, docs/marketplace.md): a provision creates the
// provider's object for a ManagedControlPlane, recorded by the instance's
// namespace osb-<name> on the onboarding cluster; a bind is an
// AccessRequest for that control plane with the offering's binding rules.
// The state of an instance is read from those objects, so a restart loses
// nothing. It uses package sf for the names, namespace ownership and Store
// of SF instances, so that an id never serves both backends.
package code
