package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// VersionPackage is the package whose variables the linker stamps.
const VersionPackage = "github.com/marketplane/marketplane/pkg/version"

// SumsFile is the name of the checksum file in the output directory.
const SumsFile = "SHA256SUMS"

// DefaultBinaries are the release binaries, each a directory under cmd/.
var DefaultBinaries = []string{"marketplane", "marketplane-operator", "marketplane-interoperator", "marketplane-marketplace", "marketplane-broker", "marketplane-kcp-provider"}

// DefaultPlatforms are the os/arch pairs released.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Stamp is what the linker writes into pkg/version.
type Stamp struct {
	// Version is the release version (a tag such as v0.2.0).
	Version string
	// Revision is the source commit.
	Revision string
	// BuildDate is the commit time, RFC 3339.
	BuildDate string
}

// LDFlags returns the linker flags of a release build: stripped, with the
// stamp. The Dockerfile passes the same (keep them in step).
func (s Stamp) LDFlags() string {
	return strings.Join([]string{
		"-s", "-w",
		"-X", VersionPackage + ".Version=" + s.Version,
		"-X", VersionPackage + ".Revision=" + s.Revision,
		"-X", VersionPackage + ".BuildDate=" + s.BuildDate,
	}, " ")
}

// Options say what Run builds.
type Options struct {
	// Dir is the module's root directory.
	Dir string
	// Out is the directory the binaries and SHA256SUMS are written to.
	Out string
	// Go is the go command.
	Go string
	// Binaries are directories under cmd/.
	Binaries []string
	// Platforms are os/arch pairs.
	Platforms []string
	// Stamp is stamped into every binary.
	Stamp Stamp
}

// Artifact is a built binary.
type Artifact struct {
	// Path is where it was written.
	Path string
	// SHA256 is its checksum in hex.
	SHA256 string
}

// Run builds every binary for every platform into o.Out and writes their
// checksums to o.Out/SHA256SUMS.
func Run(ctx context.Context, o Options) ([]Artifact, error) {
	if len(o.Binaries) == 0 || len(o.Platforms) == 0 {
		return nil, errors.New("nothing to build: no binaries or no platforms")
	}
	for _, v := range []struct{ name, value string }{{"version", o.Stamp.Version}, {"revision", o.Stamp.Revision}, {"build date", o.Stamp.BuildDate}} {
		// A space would split the -X flag inside -ldflags.
		if v.value == "" || strings.ContainsAny(v.value, " \t\n'\"") {
			return nil, fmt.Errorf("%s %q: want a non-empty value without spaces or quotes", v.name, v.value)
		}
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", o.Out, err)
	}
	var artifacts []Artifact
	for _, name := range o.Binaries {
		for _, platform := range o.Platforms {
			a, err := Build(ctx, o, name, platform)
			if err != nil {
				return nil, err
			}
			artifacts = append(artifacts, a)
		}
	}
	if err := WriteSums(filepath.Join(o.Out, SumsFile), artifacts); err != nil {
		return nil, err
	}
	return artifacts, nil
}

// Build builds cmd/<name> for platform (os/arch) into
// o.Out/<name>-<os>-<arch>.
func Build(ctx context.Context, o Options, name, platform string) (Artifact, error) {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "/") {
		return Artifact{}, fmt.Errorf("platform %q: want os/arch", platform)
	}
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return Artifact{}, fmt.Errorf("binary %q: want a directory name under cmd/", name)
	}
	out, err := filepath.Abs(filepath.Join(o.Out, name+"-"+goos+"-"+goarch))
	if err != nil {
		return Artifact{}, fmt.Errorf("output path of %s: %w", name, err)
	}
	cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-buildvcs=false", "-ldflags", o.Stamp.LDFlags(), "-o", out, "./cmd/"+name)
	cmd.Dir = o.Dir
	// CGO off for a static binary that runs on scratch; GOFLAGS from the
	// caller's environment could change the binary, so they are dropped.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return Artifact{}, fmt.Errorf("build %s for %s: %w\n%s", name, platform, err, stderr.Bytes())
	}
	sum, err := FileSHA256(out)
	if err != nil {
		return Artifact{}, err
	}
	return Artifact{Path: out, SHA256: sum}, nil
}

// FileSHA256 returns the SHA-256 of a file in hex.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("checksum: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checksum %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WriteSums writes the artifacts' checksums to path in sha256sum's text
// format, "<hex>  <file name>" per line, sorted by file name; the names are
// relative to path's directory, where the binaries are.
func WriteSums(path string, artifacts []Artifact) error {
	lines := make([]string, 0, len(artifacts))
	for _, a := range artifacts {
		lines = append(lines, a.SHA256+"  "+filepath.Base(a.Path)+"\n")
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[64:], b[64:]) })
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// sumLine is one line of SHA256SUMS in sha256sum's text format.
var sumLine = regexp.MustCompile(`^([0-9a-f]{64})  ([A-Za-z0-9._-]+)$`)

// ReadSums parses a SHA256SUMS file into file name → checksum, failing on
// a line not in sha256sum's text format or a name listed twice.
func ReadSums(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read checksums: %w", err)
	}
	if len(raw) == 0 || raw[len(raw)-1] != '\n' {
		return nil, fmt.Errorf("%s: empty or not ending in a newline", path)
	}
	sums := map[string]string{}
	for i, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		m := sumLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%s line %d %q: want \"<64 hex digits>  <file name>\"", path, i+1, line)
		}
		if _, dup := sums[m[2]]; dup {
			return nil, fmt.Errorf("%s line %d: %s listed twice", path, i+1, m[2])
		}
		sums[m[2]] = m[1]
	}
	return sums, nil
}
