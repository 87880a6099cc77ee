// Package marketplace keeps the marketplace API current: one cluster-scoped
// Offering on the onboarding cluster per ServiceProvider and per valid
// SFService of the platform cluster. Each reconcile computes the whole set
// from its sources, applies it server-side and deletes the Offerings whose
// source is gone, so one bad source leaves out only its own Offering.
// docs/marketplace.md describes it.
package marketplace
