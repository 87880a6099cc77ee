package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Values stamped at build time with -ldflags "-X ...". Empty means not
// stamped; Get then falls back to the Go build information.
var (
	// Version is the release version, a semantic version tag such as
	// v0.2.0 (`git describe --tags` between releases).
	Version = ""
	// Revision is the full commit hash the binary was built from.
	Revision = ""
	// BuildDate is when the source was committed or built, RFC 3339.
	BuildDate = ""
)

// Unknown is what Info holds for a value neither stamped nor known to the
// Go build information.
const Unknown = "dev"

// Info describes the running build.
type Info struct {
	// Version is the release version, or the main module's version, or
	// Unknown.
	Version string `json:"version"`
	// Revision is the source commit, or Unknown.
	Revision string `json:"revision"`
	// BuildDate is the commit or build time (RFC 3339), or Unknown.
	BuildDate string `json:"buildDate"`
	// GoVersion is the Go toolchain the binary was built with.
	GoVersion string `json:"goVersion"`
	// Platform is the operating system and architecture, as os/arch.
	Platform string `json:"platform"`
}

// String is the one line that --version and `marketplane version` print
// after the binary's name, e.g.
// "v0.2.0 (revision 0123abc, built 2026-11-24T10:00:00Z, go1.26.0 linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, built %s, %s %s)", i.Version, i.Revision, i.BuildDate, i.GoVersion, i.Platform)
}

// Get returns the running build's information: the stamped values, else
// the Go build information, else Unknown.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return resolve(Info{Version: Version, Revision: Revision, BuildDate: BuildDate}, bi)
}

// resolve completes the stamped values from the build information bi (nil
// when the binary has none) and the runtime.
func resolve(stamped Info, bi *debug.BuildInfo) Info {
	info := stamped
	info.GoVersion, info.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		// "(devel)" is what a build outside version control, or with
		// -buildvcs=false, reports: no version at all.
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if info.Revision == "" {
			info.Revision = settings["vcs.revision"]
			if info.Revision != "" && settings["vcs.modified"] == "true" {
				info.Revision += "-dirty"
			}
		}
		if info.BuildDate == "" {
			info.BuildDate = settings["vcs.time"]
		}
	}
	for _, v := range []*string{&info.Version, &info.Revision, &info.BuildDate} {
		if *v = strings.TrimSpace(*v); *v == "" {
			*v = Unknown
		}
	}
	return info
}
