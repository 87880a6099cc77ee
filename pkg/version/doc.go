// Package version says which build of Marketplane is running: the release
// version, the source revision and the build date, stamped into every
// binary at build time with the linker
//
//	go build -ldflags "-X github.com/marketplane/marketplane/pkg/version.Version=v0.2.0 \
//	  -X github.com/marketplane/marketplane/pkg/version.Revision=<commit> \
//	  -X github.com/marketplane/marketplane/pkg/version.BuildDate=<RFC 3339 time>"
//
// (`make release` and the Dockerfile do this; docs/release.md). A plain
// `go build` or `go install` stamps nothing: then the Go toolchain's own
// build information fills the gaps (the main module's version, the VCS
// revision and commit time), and what is still unknown reads "dev".
//
// The version shows in `--version` of every binary, in `marketplane
// version`, and as the gauge marketplane_build_info on every /metrics.
package version
