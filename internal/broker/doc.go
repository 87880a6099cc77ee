// Package broker composes the broker's Open Service Broker API: the OSB
// transport (package osb) over Dispatch, which sends each request to the
// Service Fabrik backend (package sf) or, for ServiceProviders that opted
// into OSB, to the backend of code-based offerings (package code), and the
// MergedCatalog that lists both; NewHandler builds the handler the broker
// serves. Dependencies point one way: osb knows no backend, sf and code
// implement osb.Backend, and code uses sf only for the names, namespace
// ownership and Store of SF instances, so that an id never serves both.
package broker
