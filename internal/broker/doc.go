// Package broker serves the Open Service Broker API v2.17 over net/http.
//
// It answers GET /v2/catalog from a catalog snapshot (package catalog) and
// records every provision, update, deprovision, bind and unbind as an
// SFServiceInstance or SFServiceBinding through a Store (package kubestore
// keeps them on the onboarding cluster). The inter-operator's provisioner
// acts on those objects and reports back in their status; the broker turns
// that status into OSB responses and last_operation states. The broker never
// keeps state of its own: every decision is made from the stored objects,
// so any replica can answer any request and a restart loses nothing.
//
// Operations. Each mutating request that starts work gets an operation id
// "<create|update|delete>-<n>", where n counts the operations of the object.
// The id is kept in the annotation broker.marketplane.io/operation. A
// re-sent request for work in progress gets the same id back; last_operation
// uses it to tell a stale cache from a new operation.
//
// Writes. Starting an operation on an existing object writes its status
// first (state update, in_queue or delete) and then its metadata and spec
// (operation id, lastoperation label, identities, spec change). The second
// write is what wakes the provisioner, which reconciles on generation,
// label and annotation changes but not on status changes; when it fails,
// the first only makes the provisioner re-apply what it already had.
//
// Tombstones. The broker holds the finalizer broker.servicefabrik.io on
// every object it creates. When deletion is finished (every other finalizer
// is gone) the object stays as a tombstone: last_operation answers
// "succeeded" until the store releases it (package kubestore, after a
// configurable time), and 410 Gone afterwards. Because the tombstone is the
// object itself, it survives broker restarts. A tombstone never blocks its
// id: a provision or bind with the same id releases it at once and creates
// the new object, whose operations count on from the tombstone's, so that
// a poll of the finished delete answers 410 Gone.
//
// Requests. Every instance and binding endpoint runs one pipeline (see
// pipeline.go): parse the ids, query and body once, validate them against
// the catalog, act on a fresh read (deciding again after a write
// conflict), and respond with the outcome of the operation it started or
// joined.
//
// Everything a platform sends is checked before anything is written, so a
// 4xx response leaves the stored objects as they were.
//
// Code-based offerings. With a Router in front of the Server, the broker
// also serves the ServiceProviders that opted into OSB (CodeOfferings,
// docs/marketplace.md): a provision creates the provider's object for a
// ManagedControlPlane, recorded by the namespace osb-<name>; a bind is an
// AccessRequest for that control plane with the offering's binding rules.
package broker
