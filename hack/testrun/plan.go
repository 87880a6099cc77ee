package main

import (
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// testFlag says how a `go test` flag reaches the test binary.
type testFlag struct {
	bool bool // takes no value (-v, or -v=true)
}

// runFlags are the `go test` flags passed to each test binary as -test.<name>.
var runFlags = map[string]testFlag{
	"count": {}, "timeout": {}, "run": {}, "skip": {}, "parallel": {}, "cpu": {},
	"shuffle": {}, "bench": {}, "benchtime": {}, "list": {},
	"v": {bool: true}, "short": {bool: true}, "failfast": {bool: true}, "benchmem": {bool: true},
}

// buildFlags are the `go test` flags given to `go test -c` as they are.
var buildFlags = map[string]testFlag{
	"race": {bool: true}, "trimpath": {bool: true},
	"tags": {}, "gcflags": {}, "ldflags": {}, "mod": {}, "vet": {},
}

// defaultTimeout is go test's -timeout when none is given.
const defaultTimeout = 10 * time.Minute

// options are the parsed command line: go test's flags, split into those of the
// build and those of the test binaries, and the package patterns.
type options struct {
	parallel  int           // -p: test binaries run at once
	binDir    string        // -bindir: where the test binaries are kept between runs
	buildArgs []string      // flags for `go test -c`
	testArgs  []string      // flags for every test binary (-test.*), -test.paniconexit0 first
	timeout   time.Duration // -timeout, for the kill alarm (0: none)
	verbose   bool          // -v: print the output of passing packages too
	failFast  bool          // -failfast: start no package after a failure
	buildOnly bool          // -buildonly: build the test binaries, run none
	// nice is the niceness the test binaries run at (-nice), except
	// those of the favored packages (-favor: import paths or directories).
	nice     int
	favored  []string
	patterns []string
}

// parseArgs reads `testrun [flags] [packages]`, where the flags are -p, -bindir
// and the go test flags listed in runFlags and buildFlags, written as go test
// accepts them (-flag=value, -flag value, --flag; -flag or -flag=bool for
// booleans). Flags and packages may be mixed, as with go test. Any other flag
// is an error rather than silently ignored.
func parseArgs(args []string) (options, error) {
	p := &argParser{args: args}
	p.o = options{parallel: 4, binDir: filepath.Join("bin", "testbin"), timeout: defaultTimeout}
	p.o.testArgs = []string{"-test.paniconexit0"}
	for ; p.i < len(args); p.i++ {
		a := args[p.i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			p.o.patterns = append(p.o.patterns, a)
			continue
		}
		if err := p.flag(a); err != nil {
			return p.o, err
		}
	}
	o := p.o
	// go test links its test binaries without the symbol table and DWARF (they are
	// run once); go test -c keeps them unless told. Stripped, the link is cheaper and
	// the binaries are those go test would run.
	o.buildArgs = append(o.buildArgs, strings.TrimSpace("-ldflags=-s -w "+p.ldflags))
	if !p.timeoutSet {
		o.testArgs = append(o.testArgs, "-test.timeout="+defaultTimeout.String())
	}
	if len(o.patterns) == 0 {
		o.patterns = []string{"."}
	}
	return o, nil
}

// argParser is parseArgs' state while it walks the arguments.
type argParser struct {
	o          options
	args       []string
	i          int    // the argument being read
	timeoutSet bool   // -timeout was given
	ldflags    string // -ldflags, added to the stripping flags at the end
}

// flag reads the flag a (args[p.i]) and, if it takes one, its value.
func (p *argParser) flag(a string) error {
	name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
	f := flagArg{arg: a, name: name, value: value, hasValue: hasValue}
	switch name {
	case "buildonly":
		b, err := boolValue(name, value, hasValue)
		p.o.buildOnly = b
		return err
	case "p", "bindir", "nice", "favor":
		return p.testrunFlag(f)
	}
	if spec, ok := buildFlags[name]; ok {
		return p.buildFlag(f, spec)
	}
	spec, ok := runFlags[name]
	if !ok {
		return fmt.Errorf("flag %s is not supported by testrun (use go test)", a)
	}
	return p.runFlag(f, spec)
}

// flagArg is one flag as written: -name, -name=value or -name value.
type flagArg struct {
	arg, name, value string
	hasValue         bool
}

// needValue returns f's value, from the next argument when f has no
// "=value".
func (p *argParser) needValue(f flagArg) (string, error) {
	if f.hasValue {
		return f.value, nil
	}
	if p.i+1 >= len(p.args) {
		return "", fmt.Errorf("flag -%s needs a value", f.name)
	}
	p.i++
	return p.args[p.i], nil
}

// testrunFlag reads testrun's own -p, -bindir, -nice and -favor.
func (p *argParser) testrunFlag(f flagArg) error {
	v, err := p.needValue(f)
	if err != nil {
		return err
	}
	switch f.name {
	case "bindir":
		p.o.binDir = v
		return nil
	case "favor":
		p.o.favored = append(p.o.favored, strings.Split(v, ",")...)
		return nil
	case "nice":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 19 {
			return fmt.Errorf("-nice %q: want a niceness from 0 to 19", v)
		}
		p.o.nice = n
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return fmt.Errorf("-p %q: want a positive number", v)
	}
	p.o.parallel = n
	return nil
}

// buildFlag reads a flag of `go test -c`.
func (p *argParser) buildFlag(f flagArg, spec testFlag) error {
	if spec.bool {
		if _, err := boolValue(f.name, f.value, f.hasValue); err != nil {
			return err
		}
		p.o.buildArgs = append(p.o.buildArgs, f.arg)
		return nil
	}
	v, err := p.needValue(f)
	if err != nil {
		return err
	}
	if f.name == "ldflags" {
		p.ldflags = v
		return nil
	}
	p.o.buildArgs = append(p.o.buildArgs, "-"+f.name+"="+v)
	return nil
}

// runFlag reads a flag of the test binaries.
func (p *argParser) runFlag(f flagArg, spec testFlag) error {
	if spec.bool {
		b, err := boolValue(f.name, f.value, f.hasValue)
		if err != nil {
			return err
		}
		switch f.name {
		case "v":
			p.o.verbose = b
		case "failfast":
			p.o.failFast = b
		}
		p.o.testArgs = append(p.o.testArgs, "-test."+f.name+"="+strconv.FormatBool(b))
		return nil
	}
	v, err := p.needValue(f)
	if err != nil {
		return err
	}
	if f.name == "timeout" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("-timeout %q: %w", v, err)
		}
		p.o.timeout, p.timeoutSet = d, true
	}
	p.o.testArgs = append(p.o.testArgs, "-test."+f.name+"="+v)
	return nil
}

func boolValue(name, value string, hasValue bool) (bool, error) {
	if !hasValue {
		return true, nil
	}
	b, err := strconv.ParseBool(value)
	if err != nil {
		return false, fmt.Errorf("-%s=%q: want a boolean", name, value)
	}
	return b, nil
}

// testPackage is one package with tests, in the order the tests are run.
type testPackage struct {
	ImportPath string
	Dir        string
	bucket     int // index into the plan's buckets
}

// binaryName is the file name `go test -c -o DIR/` gives the package's test
// binary: the last element of the import path (the one before it for a major
// version suffix such as /v2), plus ".test" (cmd/go's testBinaryName).
func binaryName(importPath string) string {
	elem := path.Base(importPath)
	if elem != importPath && isVersionElement(elem) {
		elem = path.Base(path.Dir(importPath))
	}
	return elem + ".test"
}

// isVersionElement reports whether s is a major version suffix (v2, v3, ...).
func isVersionElement(s string) bool {
	if len(s) < 2 || s[0] != 'v' || s[1] == '0' || s[1] == '1' && len(s) == 2 {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// bucket is one `go test -c -o <binDir>/<Dir>/` invocation: packages whose
// test binaries have distinct names.
type bucket struct {
	Dir      string // relative to the cache directory: first-0, rest-0, rest-1, ...
	Packages []int  // indexes into the plan's packages, in run order
}

// planBuckets groups packages, given in run order, into build invocations. The
// first `first` packages (those that start at once) get buckets of their own,
// built before the rest, so that they can start while the rest is built. Within
// each group, a package goes to the first bucket that has no binary of its name
// yet: as many buckets as the most frequent binary name. A package's bucket, and
// so its binary's path, stays the same from run to run as long as the order of
// the packages does, which lets `go test -c` find the binary current and skip
// the link.
func planBuckets(pkgs []testPackage, first int) []bucket {
	var buckets []bucket
	groupStart := 0
	for i := range pkgs {
		group, prefix := 0, "first"
		if i >= first {
			group, prefix = 1, "rest"
		}
		if group == 1 && (i == first) {
			groupStart = len(buckets)
		}
		name := binaryName(pkgs[i].ImportPath)
		layer := 0
		for b := groupStart; b < len(buckets); b, layer = b+1, layer+1 {
			if !bucketHas(buckets[b], pkgs, name) {
				break
			}
		}
		if groupStart+layer == len(buckets) {
			buckets = append(buckets, bucket{Dir: fmt.Sprintf("%s-%d", prefix, layer)})
		}
		b := groupStart + layer
		buckets[b].Packages = append(buckets[b].Packages, i)
		pkgs[i].bucket = b
	}
	return buckets
}

func bucketHas(b bucket, pkgs []testPackage, name string) bool {
	for _, i := range b.Packages {
		if binaryName(pkgs[i].ImportPath) == name {
			return true
		}
	}
	return false
}

// noTestsToRun is the testing package's warning when -run matches no test.
var noTestsToRun = []byte("testing: warning: no tests to run\n")

// report is what go test prints for a package that ran: on success the "ok"
// line (after the output with -v); on failure the output, the reason if the
// output does not tell it, and the FAIL line.
func report(importPath string, out []byte, elapsed time.Duration, runErr error, verbose bool) []byte {
	var b bytes.Buffer
	t := fmt.Sprintf("%.3fs", elapsed.Seconds())
	if runErr == nil {
		if verbose {
			b.Write(out)
			if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
				b.WriteByte('\n')
			}
		}
		norun := ""
		if bytes.HasPrefix(out, noTestsToRun) || bytes.Contains(out, append([]byte("\n"), noTestsToRun...)) {
			norun = " [no tests to run]"
		}
		fmt.Fprintf(&b, "ok  \t%s\t%s%s\n", importPath, t, norun)
		return b.Bytes()
	}
	b.Write(out)
	if len(out) == 0 || !exitedWithStatus(runErr) {
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s\n", runErr)
	} else if !bytes.HasSuffix(out, []byte("\n")) {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "FAIL\t%s\t%s\n", importPath, t)
	return b.Bytes()
}
