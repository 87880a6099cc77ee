package scaffold

import (
	"bytes"
	"embed"
	"fmt"
	"go/format"
	"maps"
	"path"
	"slices"
	"strings"
	"text/template"
	"time"
)

// ControllerGenVersion is the controller-gen the generated Makefile pins;
// the rendered deepcopy code and CRDs are what it generates.
const ControllerGenVersion = "v0.21.0"

// The generated `make test` is sized for a loaded 2-core machine: two tests
// of a package at once (TestParallel), each within TestBudget (its waits
// fail it, naming what they waited for, when it is spent), and go test's
// -timeout (TestTimeout) above the sum of the budgets of the tests that run
// one after another, so that a test's own failure always comes before go
// test's goroutine dump. TestMakeTestTimeoutCoversBudgets checks the sum.
const (
	TestBudget   = 3 * time.Minute
	TestParallel = 2
	TestTimeout  = 35 * time.Minute
)

//go:embed templates
var templates embed.FS

// values are what the templates see.
type values struct {
	// Module is the project's module path.
	Module string
	// Name is the provider's name (binary, cmd/<name>).
	Name string
	// Kind, KindLower and Plural name the ServiceProviderAPI.
	Kind, KindLower, Plural string
	// Group is the full API group.
	Group string
	// DomainGroup, DomainKind and DomainPlural name the sample's
	// DomainServiceAPI, the CRD installed into MCP clusters.
	DomainGroup, DomainKind, DomainPlural string
	// WorkloadCluster: the provider uses a workload cluster.
	WorkloadCluster bool
	// InModule: the project is part of another module.
	InModule bool
	// MarketplaneDir is the Marketplane checkout, absolute or relative to
	// the project, or empty when unknown; the Makefile finds the
	// API-server binaries in its bin/.
	MarketplaneDir string
	// MarketplaneModule and ControllerGenVersion are the constants.
	MarketplaneModule, ControllerGenVersion string
	// TestBudget is TestBudget as a Go expression, TestBudgetText as
	// the README writes it; TestTimeout and TestParallel are the
	// Makefile's (go test's flags).
	TestBudget, TestBudgetText, TestTimeout string
	TestParallel                            int
}

func newValues(o Options, name, group string) values {
	lower := strings.ToLower(o.Kind)
	return values{
		Module:               o.Module,
		Name:                 name,
		Kind:                 o.Kind,
		KindLower:            lower,
		Plural:               plural(lower),
		Group:                group,
		DomainGroup:          "domain." + group,
		DomainKind:           o.Kind + "Object",
		DomainPlural:         lower + "objects",
		WorkloadCluster:      o.WorkloadCluster,
		InModule:             o.InModule,
		MarketplaneModule:    MarketplaneModule,
		ControllerGenVersion: ControllerGenVersion,
		TestBudget:           goDuration(TestBudget),
		TestBudgetText:       shortDuration(TestBudget),
		TestTimeout:          shortDuration(TestTimeout),
		TestParallel:         TestParallel,
	}
}

// goDuration writes d, a whole number of minutes or seconds, as a Go
// expression: 3 * time.Minute.
func goDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d * time.Minute", d/time.Minute)
	}
	return fmt.Sprintf("%d * time.Second", d/time.Second)
}

// shortDuration writes d, a whole number of minutes or seconds, as go test's
// flags take it: 35m.
func shortDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// projectFile maps a template to the file it renders.
type projectFile struct {
	// template is the path under templates/.
	template string
	// path returns the file's path in the project.
	path func(v values) string
}

func fixed(p string) func(values) string { return func(values) string { return p } }

// projectFiles are the files of every project; go.mod and go.sum are added
// by NewProject.
var projectFiles = []projectFile{
	{"Makefile.tmpl", fixed("Makefile")},
	{"README.md.tmpl", fixed("README.md")},
	{"gitignore.tmpl", fixed(".gitignore")},
	{"api/v1alpha1/doc.go.tmpl", fixed("api/v1alpha1/doc.go")},
	{"api/v1alpha1/groupversion_info.go.tmpl", fixed("api/v1alpha1/groupversion_info.go")},
	{"api/v1alpha1/kind_types.go.tmpl", func(v values) string { return "api/v1alpha1/" + v.KindLower + "_types.go" }},
	{"api/v1alpha1/providerconfig_types.go.tmpl", fixed("api/v1alpha1/providerconfig_types.go")},
	{"api/v1alpha1/zz_generated.deepcopy.go.tmpl", fixed("api/v1alpha1/zz_generated.deepcopy.go")},
	{"api/crds/crds.go.tmpl", fixed("api/crds/crds.go")},
	{"api/crds/crds_test.go.tmpl", fixed("api/crds/crds_test.go")},
	{"api/crds/manifests/kind.yaml.tmpl", func(v values) string { return "api/crds/manifests/" + v.Group + "_" + v.Plural + ".yaml" }},
	{"api/crds/manifests/providerconfig.yaml.tmpl", func(v values) string { return "api/crds/manifests/" + v.Group + "_providerconfigs.yaml" }},
	{"internal/controller/doc.go.tmpl", fixed("internal/controller/doc.go")},
	{"internal/controller/reconciler.go.tmpl", fixed("internal/controller/reconciler.go")},
	{"internal/controller/domain.go.tmpl", fixed("internal/controller/domain.go")},
	{"internal/controller/setup.go.tmpl", fixed("internal/controller/setup.go")},
	{"internal/controller/unit_test.go.tmpl", fixed("internal/controller/unit_test.go")},
	{"internal/controller/suite_test.go.tmpl", fixed("internal/controller/suite_test.go")},
	{"internal/controller/controller_test.go.tmpl", fixed("internal/controller/controller_test.go")},
	{"internal/controller/ownership_test.go.tmpl", fixed("internal/controller/ownership_test.go")},
	{"internal/controller/wait_test.go.tmpl", fixed("internal/controller/wait_test.go")},
	{"cmd/main.go.tmpl", func(v values) string { return "cmd/" + v.Name + "/main.go" }},
	{"cmd/main_test.go.tmpl", func(v values) string { return "cmd/" + v.Name + "/main_test.go" }},
	{"config/serviceprovider.yaml.tmpl", fixed("config/serviceprovider.yaml")},
	{"config/providerconfig.yaml.tmpl", fixed("config/providerconfig.yaml")},
	{"config/kind.yaml.tmpl", func(v values) string { return "config/sample-" + v.KindLower + ".yaml" }},
	{"test/e2e/validate_test.go.tmpl", fixed("test/e2e/validate_test.go")},
}

// funcs are the template functions.
var funcs = template.FuncMap{
	// backquote wraps s in Go raw-string quotes.
	"backquote": func(s string) string { return "`" + s + "`" },
}

// sortedBlocks are the blocks of a template that defines "header": one per
// Go type, by the type name they are for. execute writes them after the
// header, sorted by that name, as controller-gen orders its deepcopy code.
var sortedBlocks = map[string]func(values) string{
	"kind":               func(v values) string { return v.Kind },
	"kindlist":           func(v values) string { return v.Kind + "List" },
	"kindspec":           func(v values) string { return v.Kind + "Spec" },
	"kindstatus":         func(v values) string { return v.Kind + "Status" },
	"providerconfig":     func(values) string { return "ProviderConfig" },
	"providerconfiglist": func(values) string { return "ProviderConfigList" },
	"providerconfigspec": func(values) string { return "ProviderConfigSpec" },
	// Only with a workload cluster (the block is empty otherwise).
	"workload": func(values) string { return "Workload" },
}

// execute renders t, or for a template that defines "header", the header
// and then the sortedBlocks in the order of their type names.
func execute(t *template.Template, w *bytes.Buffer, v values) error {
	if t.Lookup("header") == nil {
		return t.Execute(w, v)
	}
	if err := t.ExecuteTemplate(w, "header", v); err != nil {
		return err
	}
	blocks := slices.Collect(maps.Keys(sortedBlocks))
	slices.SortFunc(blocks, func(a, b string) int { return strings.Compare(sortedBlocks[a](v), sortedBlocks[b](v)) })
	for _, b := range blocks {
		if t.Lookup(b) == nil {
			return fmt.Errorf("no block %q", b)
		}
		if err := t.ExecuteTemplate(w, b, v); err != nil {
			return err
		}
	}
	return nil
}

// render renders every projectFile with v. Go files are gofmt'ed, which
// also catches a template that produces invalid Go.
func render(v values) ([]File, error) {
	out := make([]File, 0, len(projectFiles)+2)
	for _, pf := range projectFiles {
		raw, err := templates.ReadFile(path.Join("templates", pf.template))
		if err != nil {
			return nil, fmt.Errorf("scaffold: template %s: %w", pf.template, err)
		}
		t, err := template.New(pf.template).Delims("[[", "]]").Funcs(funcs).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("scaffold: template %s: %w", pf.template, err)
		}
		var buf bytes.Buffer
		if err := execute(t, &buf, v); err != nil {
			return nil, fmt.Errorf("scaffold: render %s: %w", pf.template, err)
		}
		data := buf.Bytes()
		name := pf.path(v)
		if strings.HasSuffix(name, ".go") {
			formatted, err := format.Source(data)
			if err != nil {
				return nil, fmt.Errorf("scaffold: %s rendered invalid Go: %w", name, err)
			}
			data = formatted
		}
		out = append(out, File{Path: name, Data: data})
	}
	return out, nil
}
