package scaffold

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/mod/modfile"
)

// placeholderVersion is the version a module is required at when a
// replace directive provides it: the usual stand-in for "no version".
const placeholderVersion = "v0.0.0-00010101000000-000000000000"

// defaultGoVersion is the go directive of a project whose Marketplane
// checkout is unknown. A test keeps it equal to Marketplane's go.mod.
const defaultGoVersion = "1.26.0"

// ErrModuleNotFound is returned by FindModuleRoot when no directory at or
// above the start has a go.mod of the module.
var ErrModuleNotFound = errors.New("module not found")

// FindModuleRoot returns the nearest directory at or above start whose
// go.mod declares module modPath. go.mod files of other modules on the way
// are passed over.
func FindModuleRoot(start, modPath string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for {
		if mp, err := modulePath(filepath.Join(dir, "go.mod")); err == nil && mp == modPath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no go.mod of module %s at or above %s", ErrModuleNotFound, modPath, start)
		}
		dir = parent
	}
}

// enclosingModule returns the root and module path of the nearest go.mod
// at or above dir (which need not exist yet).
func enclosingModule(dir string) (root, modPath string, err error) {
	for d := dir; ; {
		mp, err := modulePath(filepath.Join(d, "go.mod"))
		if err == nil {
			return d, mp, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", "", err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", fmt.Errorf("%w: no go.mod at or above %s", ErrModuleNotFound, dir)
		}
		d = parent
	}
}

// modulePath reads the module path of a go.mod file.
func modulePath(goMod string) (string, error) {
	data, err := os.ReadFile(goMod)
	if err != nil {
		return "", err
	}
	mp := modfile.ModulePath(data)
	if mp == "" {
		return "", fmt.Errorf("%s declares no module", goMod)
	}
	return mp, nil
}

// checkMarketplane checks that dir is a Marketplane checkout and returns
// its parsed go.mod.
func checkMarketplane(dir string) (*modfile.File, error) {
	name := filepath.Join(dir, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--marketplane-path %s: %w", dir, err)
	}
	f, err := modfile.ParseLax(name, data, nil)
	if err != nil {
		return nil, fmt.Errorf("--marketplane-path %s: %w", dir, err)
	}
	if f.Module == nil || f.Module.Mod.Path != MarketplaneModule {
		return nil, fmt.Errorf("--marketplane-path %s: its go.mod is not module %s", dir, MarketplaneModule)
	}
	return f, nil
}

// goMod renders the project's go.mod: the module, Marketplane's go
// version, a requirement of Marketplane and, when mp (Marketplane's go.mod)
// is known, its requirements as indirect ones, so that the project builds
// at once with exactly Marketplane's dependency versions (`go mod tidy`
// then drops those it does not use), and the replace directive.
func goMod(modPath, replace string, mp *modfile.File) ([]byte, error) {
	f := &modfile.File{}
	if err := f.AddModuleStmt(modPath); err != nil {
		return nil, fmt.Errorf("go.mod: %w", err)
	}
	goVersion := defaultGoVersion
	if mp != nil && mp.Go != nil {
		goVersion = mp.Go.Version
	}
	if err := f.AddGoStmt(goVersion); err != nil {
		return nil, fmt.Errorf("go.mod: %w", err)
	}
	reqs := []*modfile.Require{{Mod: moduleVersion(MarketplaneModule, placeholderVersion)}}
	if mp != nil {
		for _, r := range mp.Require {
			reqs = append(reqs, &modfile.Require{Mod: r.Mod, Indirect: true})
		}
	}
	f.SetRequireSeparateIndirect(reqs)
	if replace != "" {
		if err := f.AddReplace(MarketplaneModule, "", replace, ""); err != nil {
			return nil, fmt.Errorf("go.mod: %w", err)
		}
	}
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return nil, fmt.Errorf("go.mod: %w", err)
	}
	return out, nil
}
