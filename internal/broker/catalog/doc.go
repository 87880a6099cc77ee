// Package catalog turns the SFService and SFPlan objects of the platform
// cluster into what the OSB broker serves and checks requests against: the
// GET /v2/catalog body, prebuilt as bytes with its ETag, and an index of
// services and plans with their compiled parameter schemas and broker
// settings (async provisioning and binding, update predecessors, maintenance
// version, dashboard URL template).
//
// A Snapshot is immutable. A Watcher keeps the current one: informers on
// the catalog namespace trigger a rebuild on every change, and readers load
// the latest snapshot with one atomic pointer read, so serving the catalog
// costs no allocation and no lock.
//
// The code-based offerings (ServiceProviders that opted into OSB) come from
// the Offerings of the onboarding cluster (BuildCode, OfferingWatcher) and
// are appended to the SF catalog by Merge.
package catalog
