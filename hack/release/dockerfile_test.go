package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// instruction is one Dockerfile instruction, its continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// stage is one FROM and the instructions up to the next.
type stage struct {
	base, name string
	body       []instruction
}

// parseDockerfile reads the stages of a Dockerfile: comments dropped,
// lines ending in a backslash joined with the next.
func parseDockerfile(t *testing.T, path string) []*stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		stages []*stage
		line   string
	)
	s := bufio.NewScanner(f)
	for s.Scan() {
		text := strings.TrimSpace(s.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line += cont + " "
			continue
		}
		line += text
		cmd, args, _ := strings.Cut(line, " ")
		line = ""
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			st := &stage{base: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.name = fields[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("%s before the first FROM", in.cmd)
			}
			continue
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// chain returns st and the stages it is built on, st first, ending at the
// one whose base is an image rather than a stage.
func chain(stages []*stage, st *stage) []*stage {
	out := []*stage{st}
	for {
		i := slices.IndexFunc(stages, func(s *stage) bool { return s.name != "" && s.name == out[len(out)-1].base })
		if i < 0 || slices.Contains(out, stages[i]) {
			return out
		}
		out = append(out, stages[i])
	}
}

// last returns the args of the last instruction cmd in the chain (the one
// in effect), or "".
func last(ch []*stage, cmd string) string {
	for _, st := range ch {
		for i := len(st.body) - 1; i >= 0; i-- {
			if st.body[i].cmd == cmd {
				return st.body[i].args
			}
		}
	}
	return ""
}

// cmdBinaries returns the directories under cmd/.
func cmdBinaries(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("..", "..", "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		t.Fatal("no directories under cmd/")
	}
	return out
}

// registryHost matches an image reference whose first path component is a
// registry host (has a dot or a port, or is localhost).
var registryHost = regexp.MustCompile(`^([^/]*[.:][^/]*|localhost)/`)

// TestDockerfile checks the container build definition: base images named
// without a registry host; every binary under cmd/ accepted by the BINARY
// argument and given a target with its entrypoint; each target built on
// scratch with the CA certificates, a user entry, a numeric non-root USER
// and the OCI labels; the binary built as hack/release builds it.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join("..", "..", "Dockerfile"))
	binaries := cmdBinaries(t)

	for _, st := range stages {
		if registryHost.MatchString(st.base) || strings.Contains(st.base, "$") {
			t.Errorf("FROM %s: name base images without a registry host and without variables", st.base)
		}
	}
	if final := chain(stages, stages[len(stages)-1]); final[len(final)-1].base != "scratch" {
		t.Errorf("the final stage is built on %s; want scratch", final[len(final)-1].base)
	}

	// The build stage: the BINARY check lists exactly cmd/*, and the
	// build is hack/release's.
	bi := slices.IndexFunc(stages, func(s *stage) bool { return s.name == "build" })
	if bi < 0 {
		t.Fatal("no stage named build")
	}
	var script string
	for _, in := range stages[bi].body {
		if in.cmd == "RUN" {
			script += in.args + "\n"
		}
	}
	m := regexp.MustCompile(`case "\$\{BINARY\}" in\s+([a-z|-]+)\)`).FindStringSubmatch(script)
	if m == nil {
		t.Fatal(`the build stage does not check BINARY with case "${BINARY}" in a|b|...)`)
	}
	accepted := strings.Split(m[1], "|")
	slices.Sort(accepted)
	if diff := cmp.Diff(binaries, accepted); diff != "" {
		t.Errorf("BINARY accepts other binaries than cmd/* has: -cmd/*, +accepted:\n%s", diff)
	}
	ldflags := Stamp{Version: "${VERSION}", Revision: "${REVISION}", BuildDate: "${BUILD_DATE}"}.LDFlags()
	for _, want := range []string{"CGO_ENABLED=0", "go build -trimpath -buildvcs=false", `-ldflags "` + ldflags + `"`, `"./cmd/${BINARY}"`} {
		if !strings.Contains(script, want) {
			t.Errorf("the build stage's RUN lacks %s", want)
		}
	}

	for _, b := range binaries {
		t.Run(b, func(t *testing.T) {
			i := slices.IndexFunc(stages, func(s *stage) bool { return s.name == b })
			if i < 0 {
				t.Fatalf("no stage (--target) %s", b)
			}
			ch := chain(stages, stages[i])
			if base := ch[len(ch)-1].base; base != "scratch" {
				t.Errorf("built on %s; want scratch", base)
			}
			if ep := last(ch, "ENTRYPOINT"); ep != `["/`+b+`"]` {
				t.Errorf("ENTRYPOINT %s; want [\"/%s\"]", ep, b)
			}
			user := last(ch, "USER")
			uid, gid, hasGID := strings.Cut(user, ":")
			if !positive(uid) || (hasGID && !positive(gid)) {
				t.Errorf("USER %q: want a numeric non-zero uid[:gid] (runAsNonRoot verifies only numbers)", user)
			}
			var labels, copies string
			for _, st := range ch {
				for _, in := range st.body {
					switch in.cmd {
					case "LABEL":
						labels += in.args + " "
					case "COPY":
						copies += in.args + "\n"
					}
				}
			}
			for _, want := range []string{
				`org.opencontainers.image.title="${BINARY}"`,
				`org.opencontainers.image.version="${VERSION}"`,
				`org.opencontainers.image.revision="${REVISION}"`,
				`org.opencontainers.image.created="${BUILD_DATE}"`,
				`org.opencontainers.image.source=`,
				`org.opencontainers.image.licenses="Apache-2.0"`,
			} {
				if !strings.Contains(labels, want) {
					t.Errorf("no label %s", want)
				}
			}
			for _, want := range []string{"--from=build /etc/ssl/certs/ca-certificates.crt ", "--from=build /out/etc/passwd", "--from=build /out/bin/ /"} {
				if !strings.Contains(copies, want) {
					t.Errorf("no COPY %s", want)
				}
			}
		})
	}
}

// positive says whether id is a decimal number above zero.
func positive(id string) bool {
	n, err := strconv.Atoi(id)
	return err == nil && n > 0
}

// TestReleaseBinaries checks that the binaries released by default, by
// make release and make image, are every directory under cmd/.
func TestReleaseBinaries(t *testing.T) {
	binaries := cmdBinaries(t)
	got := slices.Sorted(slices.Values(DefaultBinaries))
	if diff := cmp.Diff(binaries, got); diff != "" {
		t.Errorf("DefaultBinaries: -cmd/*, +released:\n%s", diff)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RELEASE_BINARIES\s*:?=\s*(.*)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("the Makefile defines no RELEASE_BINARIES")
	}
	got = slices.Sorted(slices.Values(strings.Fields(string(m[1]))))
	if diff := cmp.Diff(binaries, got); diff != "" {
		t.Errorf("the Makefile's RELEASE_BINARIES: -cmd/*, +released:\n%s", diff)
	}
}

// TestDockerignore checks that .dockerignore leaves in the build context
// every package and embedded file the release binaries are built from.
func TestDockerignore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ignored := dockerignore(t, root)
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-json=Dir,EmbedFiles,Standard,Module", "./cmd/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	// The first path each entry excludes, and how many: one error per entry.
	first, excluded := map[string]string{}, map[string]int{}
	for dec.More() {
		var p struct {
			Dir        string
			EmbedFiles []string
			Standard   bool
			Module     *struct{ Main bool }
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Standard || p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append([]string{rel}, embedded(rel, p.EmbedFiles)...) {
			checked++
			for _, ig := range ignored {
				if f == ig || strings.HasPrefix(f, ig+string(filepath.Separator)) {
					if excluded[ig]++; excluded[ig] == 1 {
						first[ig] = f
					}
				}
			}
		}
	}
	for _, ig := range ignored {
		if excluded[ig] > 0 {
			t.Errorf(".dockerignore's %s excludes %s and %d more paths a release binary is built from", ig, first[ig], excluded[ig]-1)
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d paths; go list found too few of the module's packages", checked)
	}
}

// dockerignore returns the paths .dockerignore at root excludes, relative
// to root. It understands plain paths only and fails the test on a pattern.
func dockerignore(t *testing.T, root string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var ignored []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, "*?[!") {
			t.Fatalf(".dockerignore: %q: the tests understand plain paths only", line)
		}
		ignored = append(ignored, filepath.Clean(strings.Trim(line, "/")))
	}
	return ignored
}

// embedded returns the embedded files' paths relative to the module root.
func embedded(dir string, files []string) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		out = append(out, filepath.Join(dir, f))
	}
	return out
}
