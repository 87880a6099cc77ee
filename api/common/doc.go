// Package common holds the API types that several Marketplane API groups
// share: the status every reconciled object embeds, object references,
// the OIDC and role-binding configuration used by AccessRequests and
// ManagedControlPlanes, Duration, the type of every duration field, and the
// bound of every quantity field (QuantityRule, ParseQuantity). The JSON field names follow openMCP's
// api/common package so that openMCP manifests decode unchanged.
//
// The package is not an API group of its own; it has no GroupVersion and no
// kinds, only types embedded by the groups under api/.
//
// +kubebuilder:object:generate=true
package common
