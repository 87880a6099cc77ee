package helmworker

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/marketplane/marketplane/internal/render/internal/lru"
	"github.com/marketplane/marketplane/internal/render/internal/plain"
)

// The file descriptors a worker reads requests from and writes responses
// to: the pool's pipes, as the first two of exec.Cmd.ExtraFiles. Standard
// output is left alone, so that nothing a library prints there can corrupt
// the protocol.
const (
	requestFD  = 3
	responseFD = 4
)

// Exit codes of a worker that ends itself.
const (
	exitProtocol = 3 // the pool's pipe broke or sent garbage
	exitOverdue  = 4 // a render outlived its time limit by selfKillGrace
)

// selfKillGrace is how long after its time limit a render ends its worker
// itself. The pool kills it at the time limit; this is for a pool that is
// gone.
const selfKillGrace = 2 * time.Second

// Charts a worker keeps loaded, and their summed archive size.
const (
	workerChartCacheSize  = 16
	workerChartCacheBytes = 128 << 20
)

// init turns the process into a worker when EnvVar is set: it serves renders
// until the pool closes the pipe and then exits, so that the program's main
// (or a test binary's tests) never runs in a worker.
func init() {
	token, ok := os.LookupEnv(EnvVar)
	if !ok {
		return
	}
	os.Exit(serve(token))
}

// serve answers requests on the pool's pipes until the pool closes them.
func serve(token string) int {
	in := os.NewFile(requestFD, "requests")
	out := os.NewFile(responseFD, "responses")
	if in == nil || out == nil {
		fmt.Fprintln(os.Stderr, "helm worker: started without the pool's pipes")
		return exitProtocol
	}
	dec := gob.NewDecoder(bufio.NewReader(in))
	w := bufio.NewWriter(out)
	enc := gob.NewEncoder(w)
	if err := send(enc, w, hello{Token: token}); err != nil {
		return exitProtocol
	}
	charts := lru.New[[32]byte, *chart.Chart](workerChartCacheSize, workerChartCacheBytes)
	for {
		var req Request
		if err := dec.Decode(&req); err != nil {
			// The pool closed the pipe (or is gone): nothing more to do.
			return 0
		}
		if req.MaxMemoryBytes > 0 {
			debug.SetMemoryLimit(req.MaxMemoryBytes / 2)
		}
		overdue := time.AfterFunc(req.Timeout+selfKillGrace, func() {
			fmt.Fprintf(os.Stderr, "helm worker: a render outlived its time limit of %s\n", req.Timeout)
			os.Exit(exitOverdue)
		})
		resp := renderRequest(&req, charts)
		overdue.Stop()
		if err := send(enc, w, resp); err != nil {
			return exitProtocol
		}
	}
}

func send(enc *gob.Encoder, w *bufio.Writer, v any) error {
	if err := enc.Encode(v); err != nil {
		return err
	}
	return w.Flush()
}

// renderRequest renders a chart as the renderer did in its own process:
// dependencies processed with the values, Helm's engine without DNS or a
// cluster, and the CRDs of the chart and of its enabled subcharts.
func renderRequest(req *Request, charts *lru.Cache[[32]byte, *chart.Chart]) (resp Response) {
	defer func() {
		if v := recover(); v != nil {
			resp = Response{Kind: KindRender, Err: fmt.Sprintf("template panicked: %v", v)}
		}
	}()
	cached, ok := charts.Get(req.Key)
	if !ok {
		if req.Archive == nil {
			return Response{Kind: KindNeedArchive}
		}
		ch, err := loader.LoadArchive(bytes.NewReader(req.Archive))
		if err != nil {
			return Response{Kind: KindLoad, Err: err.Error()}
		}
		charts.Add(req.Key, ch, int64(len(req.Archive)))
		cached = ch
	}
	ch := cloneChart(cached)
	vals, err := chartutil.ReadValues([]byte(req.Values))
	if err != nil {
		return Response{Kind: KindRender, Err: fmt.Sprintf("values are not a YAML mapping: %v", err)}
	}
	kubeVersion, err := chartutil.ParseKubeVersion(req.KubeVersion)
	if err != nil {
		return Response{Kind: KindRender, Err: fmt.Sprintf("kube version %q: %v", req.KubeVersion, err)}
	}
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = *kubeVersion

	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return Response{Kind: KindRender, Err: fmt.Sprintf("dependencies: %v", err)}
	}
	top, err := chartutil.ToRenderValues(ch, vals, req.Release, &caps)
	if err != nil {
		return Response{Kind: KindRender, Err: err.Error()}
	}
	files, err := engine.Engine{}.Render(ch, top)
	if err != nil {
		return Response{Kind: KindRender, Err: err.Error()}
	}

	resp = Response{Files: files}
	size := int64(0)
	for _, crd := range ch.CRDObjects() {
		resp.CRDs = append(resp.CRDs, File{Name: crd.Filename, Data: crd.File.Data})
		size += int64(len(crd.File.Data))
	}
	for _, text := range files {
		size += int64(len(text))
	}
	if size > req.MaxOutputBytes {
		return Response{Kind: KindSize, Size: size}
	}
	return resp
}

// cloneChart copies what rendering a chart changes: the metadata of its
// dependencies (enabled, import values), its values and its tree of
// subcharts. Templates and files are shared; nothing writes them.
func cloneChart(c *chart.Chart) *chart.Chart {
	out := *c
	if c.Metadata != nil {
		md := *c.Metadata
		md.Dependencies = make([]*chart.Dependency, len(c.Metadata.Dependencies))
		for i, d := range c.Metadata.Dependencies {
			dc := *d
			dc.ImportValues = slices.Clone(d.ImportValues)
			md.Dependencies[i] = &dc
		}
		out.Metadata = &md
	}
	if c.Values != nil {
		out.Values = plain.Copy(c.Values).(map[string]any)
	}
	deps := c.Dependencies()
	cloned := make([]*chart.Chart, len(deps))
	for i, d := range deps {
		cloned[i] = cloneChart(d)
	}
	out.SetDependencies(cloned...)
	return &out
}
