package main

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// target is one binary: the main package and the name of its file.
type target struct {
	name string
	pkg  string
}

// versionElement matches a major version suffix of an import path (v2, v3, ...).
var versionElement = regexp.MustCompile(`^v[0-9]+$`)

// parseTarget reads PACKAGE or NAME=PACKAGE.
func parseTarget(arg string) (target, error) {
	name, pkg, named := strings.Cut(arg, "=")
	if !named {
		pkg, name = arg, goExecName(arg)
	}
	if pkg == "" || name == "" || strings.ContainsAny(name, `/\`) {
		return target{}, fmt.Errorf("%q: want PACKAGE or NAME=PACKAGE, NAME a file name", arg)
	}
	return target{name: name, pkg: pkg}, nil
}

// goExecName is the file name go build gives the binary of a main package:
// its last path element, or the one before it when that is a major version
// suffix (go.etcd.io/etcd/server/v3 gives "server").
func goExecName(pkg string) string {
	elem := path.Base(pkg)
	if versionElement.MatchString(elem) && path.Dir(pkg) != "." {
		elem = path.Base(path.Dir(pkg))
	}
	return elem
}
