package scaffold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// File is one file of a project.
type File struct {
	// Path is relative to the project directory, with slashes.
	Path string
	// Data is the content.
	Data []byte
}

// Project is a rendered provider project, not yet written.
type Project struct {
	// Dir is the absolute directory the files go to.
	Dir string
	// Files are sorted by Path.
	Files []File
	// Name is the provider's name (binary, cmd/<name>).
	Name string
	// Group is the full API group.
	Group string
	// Replace is the path of Marketplane in go.mod's replace directive,
	// or empty when there is none (InModule, or Marketplane not found).
	Replace string
	// Notes tell the user what to do next, one line each.
	Notes []string
}

// NewProject validates o, resolves the paths it names and renders the
// project in memory. It writes nothing.
func NewProject(o Options) (*Project, error) {
	workDir, err := resolveWorkDir(o.WorkDir)
	if err != nil {
		return nil, err
	}
	name, group, err := validate(o)
	if err != nil {
		return nil, err
	}
	dir := workDir
	if o.Dir != "" {
		dir = absPath(workDir, o.Dir)
	}
	v := newValues(o, name, group)
	p := &Project{Dir: dir, Name: name, Group: group}

	// Where Marketplane is: the enclosing module itself (InModule inside
	// the Marketplane repository), --marketplane-path, or found above the
	// working directory.
	var mp *modfile.File
	if o.InModule {
		if v.MarketplaneDir, err = inModuleMarketplane(o, dir); err != nil {
			return nil, err
		}
	}
	if v.MarketplaneDir == "" {
		if v.MarketplaneDir, mp, err = locateMarketplane(o, workDir); err != nil {
			return nil, err
		}
		if !o.InModule {
			p.Replace = v.MarketplaneDir
		}
	}
	if p.Files, err = renderProject(o, v, p.Replace, mp); err != nil {
		return nil, err
	}
	p.Notes = nextSteps(o, p, workDir)
	return p, nil
}

// resolveWorkDir returns workDir, or the working directory when it is
// empty, as an absolute path.
func resolveWorkDir(workDir string) (string, error) {
	if workDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("scaffold: %w", err)
		}
		workDir = wd
	}
	workDir, err := filepath.Abs(workDir)
	if err != nil {
		return "", fmt.Errorf("scaffold: %w", err)
	}
	return workDir, nil
}

// validate checks the module, kind and group of o and returns the
// project's name and full API group; the error names every problem.
func validate(o Options) (name, group string, _ error) {
	var errs []error
	if err := validateModule(o.Module); err != nil {
		errs = append(errs, err)
	}
	if err := validateKind(o.Kind); err != nil {
		errs = append(errs, err)
	}
	group, err := resolveGroup(o.Group)
	if err != nil {
		errs = append(errs, err)
	}
	if o.Module != "" {
		if name, err = resolveName(o.Name, o.Module); err != nil {
			errs = append(errs, err)
		}
	}
	return name, group, errors.Join(errs...)
}

// inModuleMarketplane checks that --module is the import path of dir in
// its enclosing module and returns the path from dir to Marketplane when
// that module is Marketplane itself, else "".
func inModuleMarketplane(o Options, dir string) (string, error) {
	root, modPath, err := enclosingModule(dir)
	if err != nil {
		return "", fmt.Errorf("--in-module: %s is not inside a Go module: %w", dir, err)
	}
	want, err := importPathIn(modPath, root, dir)
	if err != nil {
		return "", fmt.Errorf("--in-module: %w", err)
	}
	if want != o.Module {
		return "", fmt.Errorf("--in-module: --module %q must be the import path of %s in module %s, which is %q", o.Module, dir, modPath, want)
	}
	if modPath != MarketplaneModule {
		return "", nil
	}
	rel, err := filepath.Rel(dir, root)
	if err != nil {
		return "", fmt.Errorf("--in-module: %w", err)
	}
	return filepath.ToSlash(rel), nil
}

// locateMarketplane returns the checkout of Marketplane that
// --marketplane-path names or that encloses workDir, with its go.mod;
// "" and nil when there is none.
func locateMarketplane(o Options, workDir string) (string, *modfile.File, error) {
	if o.MarketplanePath != "" {
		mpDir := absPath(workDir, o.MarketplanePath)
		mp, err := checkMarketplane(mpDir)
		if err != nil {
			return "", nil, err
		}
		return mpDir, mp, nil
	}
	found, err := FindModuleRoot(workDir, MarketplaneModule)
	if err != nil {
		// No checkout above workDir: go.mod gets no replace directive.
		return "", nil, nil
	}
	mp, err := checkMarketplane(found)
	if err != nil {
		return "", nil, err
	}
	return found, mp, nil
}

// renderProject renders the project's files, sorted by path, with a go.mod
// (and Marketplane's go.sum, when replace names a checkout) unless the
// project is part of an enclosing module.
func renderProject(o Options, v values, replace string, mp *modfile.File) ([]File, error) {
	files, err := render(v)
	if err != nil {
		return nil, err
	}
	if !o.InModule {
		gm, err := goMod(o.Module, replace, mp)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: "go.mod", Data: gm})
		if replace != "" {
			// Marketplane's checksums cover every module the project
			// needs, so neither building nor `go mod tidy` has to look
			// one up.
			if sum, err := os.ReadFile(filepath.Join(replace, "go.sum")); err == nil {
				files = append(files, File{Path: "go.sum", Data: sum})
			}
		}
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// nextSteps tells the user what to do with p next.
func nextSteps(o Options, p *Project, workDir string) []string {
	rel := p.Dir
	if r, err := filepath.Rel(workDir, p.Dir); err == nil && !strings.HasPrefix(r, "..") {
		rel = r
	}
	switch {
	case o.InModule:
		return []string{fmt.Sprintf("cd %s && make test", rel)}
	case p.Replace == "":
		return []string{
			MarketplaneModule + " is not published and no checkout was found (give one with --marketplane-path, or run the scaffold inside one).",
			fmt.Sprintf("Point go.mod at a checkout: cd %s && go mod edit -replace %s=/path/to/marketplane && go mod tidy", rel, MarketplaneModule),
			"Then: make test (with KUBEBUILDER_ASSETS set to the checkout's bin/, built there by `make tools`)"}
	default:
		return []string{fmt.Sprintf("cd %s && go mod tidy && make test", rel)}
	}
}

// Write writes the project's files. It refuses to overwrite: when any of
// them exists already it writes nothing and returns an error naming every
// one that exists.
func (p *Project) Write() error {
	var existing []string
	for _, f := range p.Files {
		name := filepath.Join(p.Dir, filepath.FromSlash(f.Path))
		if _, err := os.Lstat(name); err == nil {
			existing = append(existing, name)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("scaffold: %w", err)
		}
	}
	if len(existing) > 0 {
		return fmt.Errorf("scaffold: refusing to overwrite %d existing file(s); nothing was written:\n  %s",
			len(existing), strings.Join(existing, "\n  "))
	}
	for _, f := range p.Files {
		name := filepath.Join(p.Dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return fmt.Errorf("scaffold: %w", err)
		}
		// O_EXCL: a file that appeared since the check above is not
		// overwritten either.
		out, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("scaffold: %w", err)
		}
		_, err = out.Write(f.Data)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("scaffold: write %s: %w", name, err)
		}
	}
	return nil
}

// moduleVersion is a module.Version.
func moduleVersion(path, version string) module.Version {
	return module.Version{Path: path, Version: version}
}
