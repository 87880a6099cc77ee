package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/marketplane/marketplane/bench/internal/procstat"
)

// writeVerbs are the verbs of apiserver_request_total that write. APPLY
// is how the API server counts server-side apply (a PATCH on the wire).
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true}

// writeKey names a row of the write counts: an API server and a resource,
// with its subresource ("sfserviceinstances/status").
type writeKey struct {
	server   string
	resource string
}

// writeCounts are write requests by server and resource.
type writeCounts map[writeKey]float64

// minus returns w - o.
func (w writeCounts) minus(o writeCounts) writeCounts {
	out := writeCounts{}
	for k, v := range w {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range o {
		if _, ok := w[k]; !ok && v != 0 {
			out[k] = -v
		}
	}
	return out
}

// String lists the non-zero counts by resource.
func (w writeCounts) String() string {
	var parts []string
	for _, k := range w.keys() {
		if w[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k.resource, w[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// keys returns the keys of w, sorted.
func (w writeCounts) keys() []writeKey {
	keys := make([]writeKey, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].server != keys[j].server {
			return keys[i].server < keys[j].server
		}
		return keys[i].resource < keys[j].resource
	})
	return keys
}

// scrapes are request counts of API servers, from their
// apiserver_request_total, by server and resource.
type scrapes struct {
	// writes counts write requests (every response code), conflicts the
	// writes that got 409.
	writes, conflicts writeCounts
	// reads counts the other requests (GET, LIST, WATCH), keyed by verb
	// and resource ("GET sfserviceinstances").
	reads writeCounts
}

// minus returns s - o.
func (s scrapes) minus(o scrapes) scrapes {
	return scrapes{writes: s.writes.minus(o.writes), conflicts: s.conflicts.minus(o.conflicts), reads: s.reads.minus(o.reads)}
}

// scrape adds the counts of the API server named server to s.
func (s scrapes) scrape(ctx context.Context, server string, cs kubernetes.Interface) error {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("read the metrics of API server %s: %w", server, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		const prefix = "apiserver_request_total{"
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		end := strings.LastIndex(line, "} ")
		if end < 0 {
			continue
		}
		labels := parseLabels(line[len(prefix):end])
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+2:]), 64)
		if err != nil {
			continue
		}
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		if !writeVerbs[labels["verb"]] {
			s.reads[writeKey{server: server, resource: labels["verb"] + " " + res}] += v
			continue
		}
		k := writeKey{server: server, resource: res}
		s.writes[k] += v
		if labels["code"] == "409" {
			s.conflicts[k] += v
		}
	}
	return sc.Err()
}

// parseLabels parses the labels of a Prometheus text line: name="value"
// pairs separated by commas, with \" and \\ escaped in values.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.Index(s, `="`)
		if eq < 0 {
			break
		}
		name := strings.TrimLeft(s[:eq], ", ")
		s = s[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			val.WriteByte(s[i])
		}
		out[name] = val.String()
		if i >= len(s) {
			break
		}
		s = s[i+1:]
	}
	return out
}

// countingTransport counts the write requests a client sends, by
// resource, so that the benchmark's own writes can be told from the
// provisioner's in the API server's counts.
type countingTransport struct {
	server string
	next   http.RoundTripper

	mu                sync.Mutex
	counts, conflicts writeCounts
}

// wrapCounting makes cfg's clients count their writes in a new
// countingTransport.
func wrapCounting(server string, cfg *rest.Config) *countingTransport {
	t := &countingTransport{server: server, counts: writeCounts{}, conflicts: writeCounts{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		t.next = rt
		return t
	})
	return t
}

// RoundTrip implements http.RoundTripper.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := req.Method
	if verb == http.MethodPatch && req.Header.Get("Content-Type") == "application/apply-patch+yaml" {
		verb = "APPLY"
	}
	if !writeVerbs[verb] {
		return t.next.RoundTrip(req)
	}
	k := writeKey{server: t.server, resource: resourceOf(req.URL.Path)}
	t.mu.Lock()
	t.counts[k]++
	t.mu.Unlock()
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusConflict {
		t.mu.Lock()
		t.conflicts[k]++
		t.mu.Unlock()
	}
	return resp, err
}

// snapshot returns a copy of the counts of writes and of those that got
// 409.
func (t *countingTransport) snapshot() (writes, conflicts writeCounts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.counts), maps.Clone(t.conflicts)
}

// resourceOf returns the resource (with "/subresource") that an API path
// names, as apiserver_request_total labels it:
// /api/v1/namespaces/ns/configmaps/name,
// /apis/group/version/namespaces/ns/kind/name/status, /api/v1/namespaces.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "namespaces"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

// cpuSeconds returns the CPU time (user + system) this process and each of
// its child processes (etcd, kube-apiserver; the busy loops of -load under
// one name of their own) have used, by name.
func cpuSeconds() map[string]float64 {
	out := map[string]float64{}
	const selfLabel = "benchmark process (provisioner + clients)"
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		out[selfLabel] = tv(ru.Utime) + tv(ru.Stime)
	}
	defer addProvisionerCPU(out, selfLabel)
	self := os.Getpid()
	for _, p := range procstat.All() {
		if p.PPID != self || isProvisioner(p.PID) {
			continue
		}
		name := p.Comm
		if isBusyLoop(p.PID) {
			name = busyLoopsCPUName
		}
		out[name] += p.CPU
	}
	return out
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
