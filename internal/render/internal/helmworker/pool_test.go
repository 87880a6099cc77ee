package helmworker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/util/wait"
)

// archive packages a chart with a subchart that values enable, a CRD and a
// template that uses .Release, .Capabilities and a helper.
func archive(t *testing.T, loop string) []byte {
	t.Helper()
	file := func(name, data string) *chart.File { return &chart.File{Name: name, Data: []byte(data)} }
	child := &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "child", Version: "0.1.0"},
		Templates: []*chart.File{file("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-child\n")},
		Files:     []*chart.File{file("crds/child.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: child.example.org\n")},
	}
	parent := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "demo", Version: "0.1.0",
			Dependencies: []*chart.Dependency{{Name: "child", Version: "0.1.0", Condition: "child.enabled"}}},
		Raw: []*chart.File{file(chartutil.ValuesfileName, "child:\n  enabled: false\nn: 3\n")},
		Templates: []*chart.File{
			file("templates/_helpers.tpl", `{{ define "name" }}{{ .Release.Name }}-{{ .Chart.Name }}{{ end }}`),
			file("templates/cm.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "name" . }}
  namespace: {{ .Release.Namespace }}
data:
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  n: {{ .Values.n | quote }}
  items: {{ range $i := until (int .Values.n) }}{{ $i }},{{ end }}
`+loop),
			file("templates/NOTES.txt", "notes for {{ .Release.Name }}"),
		},
		Files: []*chart.File{file("crds/demo.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: demo.example.org\n")},
	}
	parent.AddDependency(child)
	path, err := chartutil.Save(parent, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func request(data []byte, values string) Request {
	return Request{
		Key:            sha256.Sum256(data),
		Archive:        data,
		Values:         values,
		Release:        chartutil.ReleaseOptions{Name: "in-1", Namespace: "ns", Revision: 1, IsInstall: true},
		KubeVersion:    "v1.36.0",
		MaxOutputBytes: 1 << 20,
		Timeout:        time.Minute,
		MaxMemoryBytes: 512 << 20,
	}
}

// inProcess renders req as the renderer did before issue #32, in this
// process.
func inProcess(t *testing.T, req Request) (map[string]string, []File) {
	t.Helper()
	ch, err := loader.LoadArchive(bytes.NewReader(req.Archive))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ReadValues([]byte(req.Values))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := chartutil.ParseKubeVersion(req.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = *kv
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		t.Fatal(err)
	}
	top, err := chartutil.ToRenderValues(ch, vals, req.Release, &caps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Engine{}.Render(ch, top)
	if err != nil {
		t.Fatal(err)
	}
	var crds []File
	for _, c := range ch.CRDObjects() {
		crds = append(crds, File{Name: c.Filename, Data: c.File.Data})
	}
	return files, crds
}

// TestRenderAsInProcess checks that a worker renders exactly what Helm's
// engine renders in the process, for several values on one warm worker.
func TestRenderAsInProcess(t *testing.T) {
	p := New(Options{Size: 1})
	t.Cleanup(p.Close)
	data := archive(t, "")
	for _, values := range []string{"", "n: 5\nchild:\n  enabled: true\n", "n: 0\n"} {
		req := request(data, values)
		resp, err := p.Render(context.Background(), req)
		if err != nil {
			t.Fatalf("values %q: %v", values, err)
		}
		if resp.Kind != KindNone {
			t.Fatalf("values %q: %v %s", values, resp.Kind, resp.Err)
		}
		files, crds := inProcess(t, req)
		if diff := cmp.Diff(files, resp.Files); diff != "" {
			t.Errorf("values %q: files (-in process +worker):\n%s", values, diff)
		}
		if diff := cmp.Diff(crds, resp.CRDs); diff != "" {
			t.Errorf("values %q: CRDs (-in process +worker):\n%s", values, diff)
		}
	}
	if s := p.Stats(); s.Started != 1 || s.Killed != 0 {
		t.Errorf("stats %+v, want one worker started and reused", s)
	}
}

// TestTimeoutKillsWorker renders a chart that loops for ever: the render
// fails at its time limit, and the worker process is gone when Render
// returns. The next render gets a new worker.
func TestTimeoutKillsWorker(t *testing.T) {
	p := New(Options{Size: 1})
	t.Cleanup(p.Close)
	ok := request(archive(t, ""), "")
	if _, err := p.Render(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	pid := idlePID(t, p)

	bomb := request(archive(t, "{{ range 1000000000000 }}{{ end }}"), "")
	bomb.Timeout = 200 * time.Millisecond
	start := time.Now()
	_, err := p.Render(context.Background(), bomb)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrTimeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the render failed after %s, its limit is 200ms", took)
	}
	if processExists(pid) {
		t.Errorf("worker %d still exists after its render was killed", pid)
	}
	if _, err := p.Render(context.Background(), ok); err != nil {
		t.Fatalf("render after the kill: %v", err)
	}
	if s := p.Stats(); s.Started != 2 || s.Killed != 1 {
		t.Errorf("stats %+v, want 2 started, 1 killed", s)
	}
}

// TestCancelKillsWorker ends the render's context while a chart loops.
func TestCancelKillsWorker(t *testing.T) {
	p := New(Options{Size: 1})
	t.Cleanup(p.Close)
	// A warm worker, so that the context ends during the render, not
	// during the worker's start.
	if _, err := p.Render(context.Background(), request(archive(t, ""), "")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := p.Render(ctx, request(archive(t, "{{ range 1000000000000 }}{{ end }}"), ""))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want the context's", err)
	}
	if s := p.Stats(); s.Killed != 1 || s.Idle != 0 {
		t.Errorf("stats %+v, want the worker killed", s)
	}
}

// TestWorkerDiedWhileIdle kills an idle worker from outside: the next
// render notices and renders on a new worker.
func TestWorkerDiedWhileIdle(t *testing.T) {
	p := New(Options{Size: 1})
	t.Cleanup(p.Close)
	req := request(archive(t, ""), "")
	if _, err := p.Render(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	pid := idlePID(t, p)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The pool reaps it.
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return !processExists(pid), nil })
	if err != nil {
		t.Fatalf("worker %d was not waited for", pid)
	}
	if _, err := p.Render(context.Background(), req); err != nil {
		t.Fatalf("render after the idle worker died: %v", err)
	}
	if s := p.Stats(); s.Started != 2 {
		t.Errorf("stats %+v, want a second worker", s)
	}
}

// TestNoWorkerFromWorkerEnvironment: a process that has EnvVar set but is
// not serving (it cannot be, in this test, but a binary without this
// package's init could be) never starts workers, so that no chain of
// processes can start.
func TestNoWorkerFromWorkerEnvironment(t *testing.T) {
	t.Setenv(EnvVar, "not-a-worker")
	p := New(Options{Size: 1})
	_, err := p.Render(context.Background(), request(archive(t, ""), ""))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "is not serving as a worker") {
		t.Fatalf("error = %v, want ErrUnavailable", err)
	}
	if s := p.Stats(); s.Started != 0 {
		t.Errorf("stats %+v, want no worker started", s)
	}
}

// TestNotAWorker starts a program that does not speak the protocol: the
// start fails, and the program is killed rather than left running.
func TestNotAWorker(t *testing.T) {
	for name, exe := range map[string]string{"Silent": "/bin/sleep", "Exits": "/bin/true"} {
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(exe); err != nil {
				t.Skip(err)
			}
			p := New(Options{Size: 1, StartTimeout: 500 * time.Millisecond})
			p.exe = exe
			_, err := p.Render(context.Background(), request(archive(t, ""), ""))
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("error = %v, want ErrUnavailable", err)
			}
		})
	}
}

// TestWorkerEnvironment checks that a worker gets none of the
// inter-operator's environment, which may hold credentials.
func TestWorkerEnvironment(t *testing.T) {
	t.Setenv("MARKETPLANE_TEST_SECRET", "s3cr3t")
	p := New(Options{Size: 1})
	t.Cleanup(p.Close)
	if _, err := p.Render(context.Background(), request(archive(t, ""), "")); err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(idlePID(t, p)) + "/environ")
	if err != nil {
		t.Skip(err)
	}
	vars := strings.Split(strings.TrimRight(string(env), "\x00"), "\x00")
	if len(vars) != 2 || !strings.HasPrefix(vars[0], EnvVar+"=") || vars[1] != "GOMAXPROCS=1" {
		t.Errorf("worker environment = %q, want only %s and GOMAXPROCS", vars, EnvVar)
	}
}

// TestIdleWorkerExpires checks that an unused worker ends.
func TestIdleWorkerExpires(t *testing.T) {
	p := New(Options{Size: 1, IdleTimeout: 50 * time.Millisecond})
	if _, err := p.Render(context.Background(), request(archive(t, ""), "")); err != nil {
		t.Fatal(err)
	}
	pid := idlePID(t, p)
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return p.Stats().Idle == 0 && !processExists(pid), nil })
	if err != nil {
		t.Errorf("the idle worker %d did not end: %+v", pid, p.Stats())
	}
}

// TestWorkerEndsOverdueRender: a worker whose pool does not kill it ends a
// render that outlives its time limit itself.
func TestWorkerEndsOverdueRender(t *testing.T) {
	p := New(Options{Size: 1})
	w, err := p.start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	req := request(archive(t, "{{ range 1000000000000 }}{{ end }}"), "")
	req.Timeout = 10 * time.Millisecond
	if err := w.send(&req); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.exited:
	case <-time.After(selfKillGrace + 30*time.Second):
		w.kill()
		t.Fatal("the worker did not end its overdue render")
	}
	if !strings.Contains(w.exitReason(), "exit status "+strconv.Itoa(exitOverdue)) {
		t.Errorf("worker ended with %s, want exit status %d", w.exitReason(), exitOverdue)
	}
}

// idlePID returns the process id of p's only idle worker.
func idlePID(t *testing.T, p *Pool) int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) != 1 {
		t.Fatalf("%d idle workers, want 1", len(p.idle))
	}
	return p.idle[0].cmd.Process.Pid
}

// processExists reports whether pid is a process (a zombie counts: it was
// not waited for).
func processExists(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
