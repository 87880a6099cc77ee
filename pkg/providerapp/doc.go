// Package providerapp turns a service provider into a binary that follows
// the provider deployment contract: `<binary> init` installs the provider's
// CRDs and registers its service kinds, `<binary> run` starts its
// controllers on the onboarding cluster with the platform cluster attached,
// leader election, health probes and metrics (marketplane_build_info
// included). A provider's main builds a Provider and calls Main.
// docs/providers.md describes the flags.
package providerapp
