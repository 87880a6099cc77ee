// Package upgrade holds the tests of the upgrade path: objects written by
// the previous release, under that release's CRDs, are still served, keep
// every field and are reconciled once this tree's operator and
// inter-operator have run their init (which applies the new CRDs) and run.
// testdata/<release> holds each release's CRDs and one object of every
// kind as that release writes them (docs/upgrade.md).
package upgrade
