// Package sf is the Service Fabrik backend of the OSB API: it records every
// provision, update, deprovision, bind and unbind as an SFServiceInstance or
// SFServiceBinding through a Store (package kubestore), which the
// inter-operator's provisioner acts on and reports back in their status. It
// keeps no state of its own, so any replica answers any request and a
// restart loses nothing: operation ids "<verb>-<n>" are annotations, a
// finished deletion stays as a tombstone until the store releases it, and
// every instance lives in a namespace sf-<name> the broker created for it
// (docs/broker.md). Every endpoint runs one pipeline (pipeline.go): check
// the request against the catalog before anything is written, act on a
// fresh read (a deletion on the cache first), deciding again on a fresh
// read after a write conflict, and answer with the outcome of the
// operation it started or joined.
package sf
