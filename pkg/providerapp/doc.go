// Package providerapp turns a service provider into a binary that follows
// the provider deployment contract (seed 04): `<binary> init` installs the
// provider's CRDs into the platform and onboarding clusters and registers its
// service kinds in ServiceProvider.status.resources, and exits non-zero on
// any failure; `<binary> run` starts the provider's controllers on the
// onboarding cluster, with the platform cluster attached, leader election,
// health probes and metrics.
//
// Every provider binary answers --version, and its /metrics carries the
// gauge marketplane_build_info: the values stamped into
// pkg/version at build time (-ldflags "-X
// github.com/marketplane/marketplane/pkg/version.Version=..."), else
// the Go build information of the provider's own main module
// (docs/release.md).
//
// A provider's main is then a few lines:
//
//	func main() {
//		app := providerapp.Provider{Name: "velero", Scheme: scheme, CRDs: crds, ServiceKinds: kinds, Setup: setup}
//		os.Exit(app.Main())
//	}
package providerapp
