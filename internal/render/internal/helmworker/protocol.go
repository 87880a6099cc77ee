// Package helmworker renders Helm charts in child processes that can be
// killed: the running binary started again with EnvVar set, which this
// package's init notices to serve renders instead of running the program.
// Workers are kept warm; one whose render runs out of time or memory is
// killed and replaced (docs/interoperator.md, "Helm charts").
package helmworker

import (
	"crypto/sha256"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
)

// EnvVar is the environment variable that makes a process a worker. Its
// value is the token the worker answers with, so that the pool can tell a
// worker from a program that does not know the protocol.
const EnvVar = "MARKETPLANE_HELM_WORKER"

// Request is one render: a chart archive, the YAML values of the release and
// what Helm needs to know about the release and the cluster.
type Request struct {
	// Key is the SHA-256 of the archive; the worker caches loaded charts
	// by it.
	Key [sha256.Size]byte
	// Archive is the chart archive (.tgz). The pool leaves it out when it
	// sent the worker the same archive before; a worker that no longer has
	// it answers NeedArchive.
	Archive []byte
	// Values are the values of the release, as YAML.
	Values string
	// Release names the release (.Release).
	Release chartutil.ReleaseOptions
	// KubeVersion is .Capabilities.KubeVersion, for example "v1.36.0".
	KubeVersion string
	// MaxOutputBytes bounds the summed size of the rendered files and the
	// chart's CRDs.
	MaxOutputBytes int64
	// Timeout is the render's time limit. The pool kills the worker when
	// it runs out; the worker ends itself a little later, in case the pool
	// is gone.
	Timeout time.Duration
	// MaxMemoryBytes is the worker's memory ceiling; the worker lets its
	// garbage collector work harder as it nears half of it.
	MaxMemoryBytes int64
}

// File is a file of a chart: a CRD of its crds/ directories.
type File struct {
	Name string
	Data []byte
}

// Kind says why a render failed.
type Kind int

// Kinds of failure.
const (
	// KindNone: the render succeeded.
	KindNone Kind = iota
	// KindRender: the chart did not render (dependencies, values or a
	// template failed); Err is Helm's message.
	KindRender
	// KindLoad: the archive is not a chart.
	KindLoad
	// KindSize: the chart rendered more than MaxOutputBytes; Size says how
	// much.
	KindSize
	// KindNeedArchive: the worker does not have the chart; send the
	// archive.
	KindNeedArchive
)

// Response is the result of a Request.
type Response struct {
	// Files are the rendered templates by their path, as Helm's engine
	// returns them.
	Files map[string]string
	// CRDs are the chart's and its enabled subcharts' CRD files, in Helm's
	// order.
	CRDs []File
	// Kind says whether and why the render failed.
	Kind Kind
	// Err is the error's message.
	Err string
	// Size is the size of the rendered output, for KindSize.
	Size int64
}

// hello is the first message of a worker: the token of its environment.
type hello struct {
	Token string
}
