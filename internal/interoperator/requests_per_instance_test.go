package interoperator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestRequestsPerInstance counts the API requests of provision and bind,
// then of unbind and deprovision, through the real broker in front of the
// real inter-operator, as the broker benchmark does: for instances of a
// one-ConfigMap plan with one binding each, the platform provisions and
// binds, unbinds (200), deprovisions with accepts_incomplete=true (202)
// and polls last_operation until the deletion succeeded. Everyone's
// requests count, failed ones too.
//
// The minimum of the finalizer protocol is six writes per instance: per
// object (binding, instance) the broker's DELETE and the provisioner's
// removal of its finalizer, plus what the provisioner deletes (the bind
// response Secret, the instance's ConfigMap). The reads left are the
// provisioner's on the target: the ConfigMap's metadata before its
// deletion (whose is it? its DELETE is conditional on that version, so
// nothing is read after) and the instance's namespace (did the
// provisioner create it?). Everything the broker and the controllers read
// of instances and bindings comes from their caches. The tombstones'
// release comes after the TTL and is not counted.
func TestRequestsPerInstance(t *testing.T) {
	needsClusters(t)
	// Not parallel: the API servers' request counters are shared.
	const n = 3
	ids := make([]string, n)
	namespaces := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("5d0c2a1e-0000-4000-8000-00000000d0%02d", i)
		namespaces[i] = sf.InstanceNamespace(ids[i])
	}
	e := newEnv(t, envOptions{namespaces: namespaces})
	ctx := context.Background()
	e.createService(t, "svc-del")
	e.createPlan(t, "plan-del", "svc-del", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision,
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\ndata:\n  k: v\n")})
	// The instances' namespaces exist on the target, as when the target
	// is the onboarding cluster (the broker created them there).
	for _, ns := range namespaces {
		must(t, target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	osb := startBroker(t, e.catalog, "platform", "deletion-requests", logr.Discard())
	waitFor(t, "the broker's catalog to offer the plan", func() bool {
		_, catalog := osb.call(http.MethodGet, "/v2/catalog", nil)
		return bytes.Contains(catalog, []byte(`"plan-del"`))
	})
	before := countRequests(t)
	for _, id := range ids {
		osb.expect(http.MethodPut, "/v2/service_instances/"+id, map[string]any{"service_id": "svc-del", "plan_id": "plan-del",
			"organization_guid": "org", "space_guid": "space"}, http.StatusCreated)
		osb.expect(http.MethodPut, "/v2/service_instances/"+id+"/service_bindings/"+id+"-b",
			map[string]any{"service_id": "svc-del", "plan_id": "plan-del"}, http.StatusCreated)
	}
	time.Sleep(quietPeriod)

	// The provision on the target: the ConfigMap is created, in one
	// request. A server-side apply would need a read first (is the name
	// another instance's?) and cost the API server twice a create; the
	// instance's namespace, which exists, is not read either.
	provision := countRequests(t).minus(before).per(n)
	for _, key := range []string{"target GET configmaps", "target APPLY configmaps", "target PATCH configmaps", "target GET namespaces"} {
		if v := provision.writes[key] + provision.reads[key]; v != 0 {
			t.Errorf("%s: %.2f per provision, want none (writes %v, reads %v)", key, v, provision.writes, provision.reads)
		}
	}
	if v := provision.writes["target POST configmaps"]; v != 1 {
		t.Errorf("target POST configmaps: %.2f per provision, want 1 (writes %v)", v, provision.writes)
	}
	t.Logf("per provision+bind: writes %v, reads %v", provision.writes, provision.reads)

	before = countRequests(t)
	query := "?service_id=svc-del&plan_id=plan-del&accepts_incomplete=true"
	for _, id := range ids {
		osb.expect(http.MethodDelete, "/v2/service_instances/"+id+"/service_bindings/"+id+"-b"+query, nil, http.StatusOK)
		var accepted struct {
			Operation string `json:"operation"`
		}
		must(t, json.Unmarshal(osb.expect(http.MethodDelete, "/v2/service_instances/"+id+query, nil, http.StatusAccepted), &accepted))
		waitFor(t, "the deprovision of "+id+" to succeed", func() bool {
			_, body := osb.call(http.MethodGet, "/v2/service_instances/"+id+"/last_operation?operation="+accepted.Operation, nil)
			return bytes.Contains(body, []byte(`"state":"succeeded"`))
		})
	}
	// Writes that follow the deletions (a status after the finalizer,
	// say) would land within this.
	time.Sleep(quietPeriod)
	got := countRequests(t).minus(before).per(n)

	// Per instance: the broker's DELETE and the provisioner's finalizer
	// patch of the binding and of the instance, the Secret's and the
	// ConfigMap's DELETE.
	wantWrites := map[string]float64{
		"onboarding DELETE sfservicebindings":  1,
		"onboarding PATCH sfservicebindings":   1,
		"onboarding DELETE sfserviceinstances": 1,
		"onboarding PATCH sfserviceinstances":  1,
		"onboarding DELETE secrets":            1,
		"target DELETE configmaps":             1,
	}
	if diff := cmp.Diff(wantWrites, got.writes); diff != "" {
		t.Errorf("API writes per unbind+deprovision, -want +got:\n%s", diff)
	}
	if total := got.total(got.writes); total > 6 {
		t.Errorf("%.2f API writes per unbind+deprovision, want at most 6", total)
	}
	// The provisioner's reads on the target: the ConfigMap's metadata
	// before its conditional DELETE (which leaves nothing to read after)
	// and the namespace it may have created. A cache that lags behind a
	// write by more than a second (CacheCatchUp) costs a read, which one
	// run of a loaded machine may see once.
	if total := got.total(got.reads); total > 2+1.0/n {
		t.Errorf("%.2f API reads per unbind+deprovision, want at most 2: %v", total, got.reads)
	}
	t.Logf("per unbind+deprovision: writes %v, reads %v", got.writes, got.reads)
}

// countedResources are the resources whose requests TestRequestsPerInstance
// counts, on the onboarding and the target cluster.
var countedResources = []string{"sfserviceinstances", "sfservicebindings", "secrets", "configmaps", "namespaces", "events"}

// requestCounts are API requests by "<cluster> <verb> <resource>".
type requestCounts struct {
	writes, reads map[string]float64
}

// countRequests reads the request counters of the onboarding and target
// API servers for countedResources: writes (POST, PUT, PATCH, APPLY,
// DELETE of one object, whatever the answer) and reads (GET, LIST; not
// WATCH).
func countRequests(t *testing.T) requestCounts {
	t.Helper()
	rc := requestCounts{writes: map[string]float64{}, reads: map[string]float64{}}
	for name, c := range map[string]*testenv.Cluster{"onboarding": onboarding, "target": target} {
		cs, err := kubernetesClient(c)
		must(t, err)
		raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		must(t, err)
		for _, line := range strings.Split(string(raw), "\n") {
			if !strings.HasPrefix(line, "apiserver_request_total{") {
				continue
			}
			verb, resource := metricLabel(line, "verb"), metricLabel(line, "resource")
			if !slices.Contains(countedResources, resource) {
				continue
			}
			if sub := metricLabel(line, "subresource"); sub != "" {
				resource += "/" + sub
			}
			var v float64
			if _, err := fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v); err != nil {
				continue
			}
			key := name + " " + verb + " " + resource
			switch verb {
			case "POST", "PUT", "PATCH", "APPLY", "DELETE":
				rc.writes[key] += v
			case "GET", "LIST":
				rc.reads[key] += v
			}
		}
	}
	return rc
}

// minus returns the requests counted since o.
func (rc requestCounts) minus(o requestCounts) requestCounts {
	diff := func(a, b map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range a {
			if d := v - b[k]; d > 0 {
				out[k] = d
			}
		}
		return out
	}
	return requestCounts{writes: diff(rc.writes, o.writes), reads: diff(rc.reads, o.reads)}
}

// per divides the counts by n.
func (rc requestCounts) per(n int) requestCounts {
	div := func(m map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range m {
			out[k] = v / float64(n)
		}
		return out
	}
	return requestCounts{writes: div(rc.writes), reads: div(rc.reads)}
}

// total sums m.
func (requestCounts) total(m map[string]float64) float64 {
	var sum float64
	for _, v := range m {
		sum += v
	}
	return sum
}

// metricLabel returns the value of label in a Prometheus text line.
func metricLabel(line, label string) string {
	_, rest, ok := strings.Cut(line, label+`="`)
	if !ok {
		return ""
	}
	value, _, _ := strings.Cut(rest, `"`)
	return value
}
