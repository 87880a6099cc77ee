// Package catalog turns the SFServices and SFPlans of the platform cluster
// (Build) and the Offerings of the onboarding cluster (BuildCode, appended
// by Merge) into immutable snapshots of what the OSB broker serves and
// checks requests against: the GET /v2/catalog body prebuilt with its ETag,
// and an index of services and plans with compiled parameter schemas and
// broker settings; a Watcher and an OfferingWatcher rebuild them on every
// change and hand out the current one with one atomic pointer read.
package catalog
