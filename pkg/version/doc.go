// Package version says which build of Marketplane is running: the release
// version, source revision and build date that the linker stamps in
// (-ldflags "-X github.com/marketplane/marketplane/pkg/version.Version=..."),
// else what the Go toolchain's build information knows, else "dev". It
// shows in --version, `marketplane version` and the marketplane_build_info
// gauge. docs/release.md describes the stamping.
package version
