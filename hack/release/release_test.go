package main

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testStamp is what the build tests stamp.
var testStamp = Stamp{Version: "v0.0.0-release.test", Revision: "0123456789abcdef0123456789abcdef01234567", BuildDate: "2026-11-24T10:00:00Z"}

// TestReproducibleBuild builds the broker for the host's platform twice
// as `make release` builds it, from two copies of the source in different
// directories, each holding only what .dockerignore leaves in an image
// build's context: the binaries must be byte-identical (no paths, times or
// VCS state in them), SHA256SUMS must list each with its checksum in
// sha256sum's format, and the binary must report the stamped version.
func TestReproducibleBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	const binary = "marketplane-broker"
	platform := runtime.GOOS + "/" + runtime.GOARCH
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ignored := dockerignore(t, root)
	// Two copies taken before either build, so that an edit in the work
	// tree between the builds cannot tell them apart.
	sources := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "src", "b")}
	for _, dir := range sources {
		copyContext(t, root, dir, ignored)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	var sums []map[string]string
	for i, dir := range sources {
		o := Options{Dir: dir, Out: t.TempDir(), Binaries: []string{binary}, Platforms: []string{platform}, Stamp: testStamp}
		start := time.Now()
		artifacts, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("build %d took %s", i+1, time.Since(start).Round(time.Millisecond))
		name := binary + "-" + runtime.GOOS + "-" + runtime.GOARCH
		if len(artifacts) != 1 || artifacts[0].Path != filepath.Join(o.Out, name) {
			t.Fatalf("artifacts %+v; want one, %s", artifacts, filepath.Join(o.Out, name))
		}
		s, err := ReadSums(filepath.Join(o.Out, SumsFile))
		if err != nil {
			t.Fatal(err)
		}
		got, err := FileSHA256(artifacts[0].Path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{name: got}, s); diff != "" {
			t.Errorf("%s does not list the binary's checksum: -want, +got:\n%s", SumsFile, diff)
		}
		sums = append(sums, s)

		if i == 0 {
			out, err := exec.CommandContext(ctx, artifacts[0].Path, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", name, err, out)
			}
			want := binary + " v0.0.0-release.test (revision 0123456789abcdef0123456789abcdef01234567, built 2026-11-24T10:00:00Z, go"
			if !strings.HasPrefix(string(out), want) || !strings.HasSuffix(string(out), " "+platform+")\n") {
				t.Errorf("%s --version printed %q; want %q...%s)", name, out, want, platform)
			}
		}
	}
	if diff := cmp.Diff(sums[0], sums[1]); diff != "" {
		t.Errorf("two builds of the same source differ (not reproducible): -first, +second:\n%s", diff)
	}
}

// copyContext copies the regular files and directories under root to dst,
// leaving out the paths ignored (relative to root) as an image build's
// context would.
func copyContext(t *testing.T, root, dst string, ignored []string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if slices.Contains(ignored, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, raw, 0o644)
		default:
			return nil
		}
	})
	if err != nil {
		t.Fatalf("copy %s to %s: %v", root, dst, err)
	}
}

// TestReadSums checks that SHA256SUMS is written in sha256sum's format,
// sorted by name, and that lines in any other format are refused.
func TestReadSums(t *testing.T) {
	dir := t.TempDir()
	a, b := strings.Repeat("a", 64), strings.Repeat("0", 64)
	path := filepath.Join(dir, SumsFile)
	if err := WriteSums(path, []Artifact{{Path: "/x/m-linux-arm64", SHA256: a}, {Path: "/x/m-linux-amd64", SHA256: b}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := b + "  m-linux-amd64\n" + a + "  m-linux-arm64\n"; string(raw) != want {
		t.Errorf("SHA256SUMS:\n%s\nwant:\n%s", raw, want)
	}
	if _, err := ReadSums(path); err != nil {
		t.Errorf("ReadSums of what WriteSums wrote: %v", err)
	}
	for name, content := range map[string]string{
		"OneSpace":     a + " m-linux-amd64\n",
		"ShortSum":     a[:63] + "  m-linux-amd64\n",
		"UpperCase":    strings.ToUpper(a) + "  m-linux-amd64\n",
		"Path":         a + "  dist/m-linux-amd64\n",
		"NoNewline":    a + "  m-linux-amd64",
		"Empty":        "",
		"ListedTwice":  a + "  m\n" + b + "  m\n",
		"BinaryMarker": a + " *m-linux-amd64\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), SumsFile)
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadSums(p); err == nil {
				t.Errorf("ReadSums accepted %q", content)
			}
		})
	}
}

// TestRunRefuses checks the arguments Run refuses before building
// anything.
func TestRunRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		reason string
		o      Options
	}{
		"NoVersion":     {"an unstamped release would report dev", Options{Binaries: []string{"marketplane"}, Platforms: []string{"linux/amd64"}, Stamp: Stamp{Revision: "r", BuildDate: "d"}}},
		"SpaceInStamp":  {"a space would split the -X flag", Options{Binaries: []string{"marketplane"}, Platforms: []string{"linux/amd64"}, Stamp: Stamp{Version: "v1 x", Revision: "r", BuildDate: "d"}}},
		"BadPlatform":   {"a platform is os/arch", Options{Binaries: []string{"marketplane"}, Platforms: []string{"linux"}, Stamp: testStamp}},
		"PathAsBinary":  {"a binary is a directory under cmd/", Options{Binaries: []string{"../internal"}, Platforms: []string{"linux/amd64"}, Stamp: testStamp}},
		"NoBinaries":    {"nothing to build is an error, not an empty release", Options{Platforms: []string{"linux/amd64"}, Stamp: testStamp}},
		"NoPlatforms":   {"nothing to build is an error, not an empty release", Options{Binaries: []string{"marketplane"}, Stamp: testStamp}},
		"UnknownBinary": {"a binary that does not exist fails the build", Options{Dir: "../..", Binaries: []string{"no-such-binary"}, Platforms: []string{"linux/amd64"}, Stamp: testStamp}},
	} {
		t.Run(name, func(t *testing.T) {
			tc.o.Out = t.TempDir()
			if _, err := Run(t.Context(), tc.o); err == nil {
				t.Errorf("Run succeeded; want an error: %s", tc.reason)
			}
		})
	}
}

// TestLDFlags checks that the linker flags stamp every variable of
// pkg/version and strip the binary.
func TestLDFlags(t *testing.T) {
	want := "-s -w -X github.com/marketplane/marketplane/pkg/version.Version=v1.2.3 " +
		"-X github.com/marketplane/marketplane/pkg/version.Revision=abc " +
		"-X github.com/marketplane/marketplane/pkg/version.BuildDate=2026-11-24T10:00:00Z"
	if got := (Stamp{Version: "v1.2.3", Revision: "abc", BuildDate: "2026-11-24T10:00:00Z"}).LDFlags(); got != want {
		t.Errorf("LDFlags() = %q; want %q", got, want)
	}
}

// TestStampFromGit checks that the stamps not given come from the
// repository (the revision a full commit hash, the build date the commit
// time in RFC 3339) and that given ones are kept.
func TestStampFromGit(t *testing.T) {
	if _, err := os.Stat(filepath.Join("..", "..", ".git")); err != nil {
		t.Skip("not a git work tree")
	}
	s := Stamp{Version: "v9.9.9"}
	if err := s.fromGit(t.Context(), filepath.Join("..", "..")); err != nil {
		t.Fatal(err)
	}
	if s.Version != "v9.9.9" {
		t.Errorf("Version %q; want the given v9.9.9 kept", s.Version)
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(s.Revision) {
		t.Errorf("Revision %q; want a full commit hash", s.Revision)
	}
	if _, err := time.Parse(time.RFC3339, s.BuildDate); err != nil {
		t.Errorf("BuildDate %q: %v", s.BuildDate, err)
	}
}
