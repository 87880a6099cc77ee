package clusters

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/marketplane/marketplane/api/common"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

func TestPlanRequests(t *testing.T) {
	tests := map[string]struct {
		reason  string
		context string
		want    map[string]string
		wantErr string
	}{
		"NoContext":    {"A plan without context requests nothing.", "", nil, ""},
		"NoRequests":   {"A context without requests asks for nothing.", `{"x": 1}`, nil, ""},
		"NullRequests": {"requests: null is no requests.", `{"requests": null}`, nil, ""},
		"NotAnObject":  {"A context that is not an object holds no requests.", `"text"`, nil, ""},
		"Strings":      {"Quantities as strings, as Service Fabrik's samples write them.", `{"requests": {"cpu": "500m", "memory": "1Gi"}}`, map[string]string{"cpu": "500m", "memory": "1Gi"}, ""},
		"Numbers":      {"Quantities as JSON numbers.", `{"requests": {"cpu": 2, "memory": 0.5}}`, map[string]string{"cpu": "2", "memory": "500m"}, ""},
		"Empty":        {"An empty map requests nothing.", `{"requests": {}}`, nil, ""},
		"List":         {"requests must be a map.", `{"requests": ["cpu"]}`, nil, "spec.context.requests of SFPlan p is not a map"},
		"BadQuantity":  {"A quantity that does not parse names the field.", `{"requests": {"cpu": "lots"}}`, nil, "spec.context.requests.cpu of SFPlan p"},
		"Boolean":      {"A boolean is no quantity.", `{"requests": {"cpu": true}}`, nil, "spec.context.requests.cpu of SFPlan p: not a quantity"},
		"Negative":     {"Negative requests would add capacity.", `{"requests": {"cpu": "-1"}}`, nil, "not negative"},
		// Quantities outside the bound of every quantity field
		// (common.ParseQuantity); parsed the slow way, the first two take
		// practically forever, the next two make every sum and comparison
		// do so.
		"NegativeExponent": {"A plan author's exponent bomb.", `{"requests": {"cpu": "1E-99999999"}}`, nil, `spec.context.requests.cpu of SFPlan p: "1E-99999999" must be a quantity`},
		"Int32Overflow":    {"An exponent beyond int32 wraps around.", `{"requests": {"cpu": "2E6024865272343"}}`, nil, "must be a quantity"},
		"HugeExponent":     {"A huge positive exponent.", `{"requests": {"memory": "1e999999999"}}`, nil, "must be a quantity"},
		"HugeNumber":       {"The same as a JSON number.", `{"requests": {"memory": 1e999999999}}`, nil, "must be a quantity"},
		"TooLarge":         {"Beyond 2^63-1.", `{"requests": {"memory": "1e19"}}`, nil, "must be a quantity"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan := &osbv1alpha1.SFPlan{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			if tc.context != "" {
				plan.Spec.Context = &runtime.RawExtension{Raw: []byte(tc.context)}
			}
			var got corev1.ResourceList
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				got, err = PlanRequests(plan)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				// Bounded, it takes microseconds; parsed the slow way,
				// minutes or forever (the goroutine is left running).
				t.Fatalf("%s\nPlanRequests() did not return within 5s", tc.reason)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nPlanRequests() error = %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nPlanRequests() error = %v", tc.reason, err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%s\nPlanRequests() = %v, want %v", tc.reason, got, tc.want)
			}
			for k, v := range tc.want {
				if q := got[corev1.ResourceName(k)]; q.Cmp(resource.MustParse(v)) != 0 {
					t.Errorf("%s\nPlanRequests()[%s] = %s, want %s", tc.reason, k, q.String(), v)
				}
			}
		})
	}
}

func TestAddResources(t *testing.T) {
	sum := AddResources(nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")})
	sum = AddResources(sum, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")})
	if q := sum[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1500m")) != 0 {
		t.Errorf("cpu = %s, want 1500m", q.String())
	}
	if q := sum[corev1.ResourceMemory]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("memory = %s, want 1Gi", q.String())
	}
	if got := AddResources(nil, nil); got != nil {
		t.Errorf("AddResources(nil, nil) = %v, want nil", got)
	}
}

// TestBoundForStatus checks that what the inter-operator writes into an
// SFCluster's status passes the bound of its CRD: sums beyond 2^63-1 (two
// nodes reporting the most a quantity holds) are capped, and of more than
// 128 resource names the first 128 are kept.
func TestBoundForStatus(t *testing.T) {
	huge := corev1.ResourceList{"example.com/device": resource.MustParse(common.QuantityMaximum), corev1.ResourceCPU: resource.MustParse("1500m")}
	sum := AddResources(AddResources(nil, huge), huge)
	many := corev1.ResourceList{}
	for i := range 200 {
		many[corev1.ResourceName(fmt.Sprintf("example.com/r%03d", i))] = resource.MustParse("1Ki")
	}
	for name, l := range map[string]corev1.ResourceList{"sum": sum, "many": many} {
		got := boundForStatus(l)
		if len(got) > maxStatusResourceNames {
			t.Errorf("%s: %d names, want at most %d", name, len(got), maxStatusResourceNames)
		}
		for k, q := range got {
			if _, err := common.ParseQuantity(q.String()); err != nil {
				t.Errorf("%s: %s = %s, which the CRD refuses: %v", name, k, q.String(), err)
			}
		}
	}
	if q := boundForStatus(sum)[corev1.ResourceCPU]; q.Cmp(resource.MustParse("3")) != 0 {
		t.Errorf("cpu = %s, want 3 (a sum within the bound stays)", q.String())
	}
	if _, ok := boundForStatus(many)["example.com/r000"]; !ok {
		t.Errorf("the first name in order was dropped")
	}
	if got := boundForStatus(nil); got != nil {
		t.Errorf("boundForStatus(nil) = %v, want nil", got)
	}
}

func TestNextCheck(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := NewStatusReconciler("p", nil, nil, "", nil, WithCheckIntervals(30*time.Second, time.Second, time.Minute))
	r.now = func() time.Time { return now }
	notReadySince := func(d time.Duration) *metav1.Condition {
		return &metav1.Condition{Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-d))}
	}
	tests := map[string]struct {
		reason string
		ready  *metav1.Condition
		want   time.Duration
	}{
		"Ready":      {"A Ready cluster is checked at the ready interval.", &metav1.Condition{Status: metav1.ConditionTrue}, 30 * time.Second},
		"NoCond":     {"Without a condition, the shortest backoff.", nil, time.Second},
		"JustFailed": {"Just turned unready: the shortest backoff.", notReadySince(0), time.Second},
		"Doubling":   {"Unready for 4s: wait 4s more, so the waits double.", notReadySince(4 * time.Second), 4 * time.Second},
		"Capped":     {"Unready for an hour: the longest backoff.", notReadySince(time.Hour), time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := r.nextCheck(tc.ready); got != tc.want {
				t.Errorf("%s\nnextCheck() = %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
}

func TestOffboardingCondition(t *testing.T) {
	many := make([]string, 7)
	for i := range many {
		many[i] = fmt.Sprintf("ns/i-%d", i)
	}
	deleted := metav1.Now()
	tests := map[string]struct {
		reason      string
		cordoned    bool
		deleting    bool
		instances   []string
		wantReason  string
		wantMessage string
	}{
		"Normal":          {"A cluster in use has no Offboarding condition.", false, false, []string{"ns/a"}, "", ""},
		"Cordoned":        {"Cordoned: the drain report.", true, false, []string{"ns/a"}, resourcev1alpha1.SFClusterReasonCordoned, "cordoned, 1 instance still on the cluster: ns/a"},
		"Drained":         {"Cordoned and empty.", true, false, nil, resourcev1alpha1.SFClusterReasonDrained, "no instance left"},
		"DeletionBlocked": {"Deleted with instances: the report names the first five.", false, true, many, resourcev1alpha1.SFClusterReasonDeletionBlocked, "waits for 7 instances still on the cluster: ns/i-0, ns/i-1, ns/i-2, ns/i-3, ns/i-4 and 2 more"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sfc := &resourcev1alpha1.SFCluster{Spec: resourcev1alpha1.SFClusterSpec{Unschedulable: tc.cordoned}}
			if tc.deleting {
				sfc.DeletionTimestamp = &deleted
			}
			c, ok := offboardingCondition(sfc, load{instances: tc.instances})
			if tc.wantReason == "" {
				if ok {
					t.Errorf("%s\noffboardingCondition() = %+v, want none", tc.reason, c)
				}
				return
			}
			if !ok || c.Reason != tc.wantReason || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("%s\noffboardingCondition() = %+v (%v), want True/%s with %q", tc.reason, c, ok, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://user:secret@10.0.0.1:6443/api/v1/nodes", Err: syscall.ECONNREFUSED}
	tests := map[string]struct {
		err  error
		want string
	}{
		"Refused":  {refused, "connection refused"},
		"Timeout":  {fmt.Errorf("list: %w", context.DeadlineExceeded), "no answer in time"},
		"Status":   {apierrors.NewServiceUnavailable("down"), "the API server answered 503 ServiceUnavailable"},
		"Internal": {apierrors.NewInternalError(errors.New("boom")), "the API server answered 500 InternalError"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := describe(tc.err)
			if got != tc.want {
				t.Errorf("describe() = %q, want %q", got, tc.want)
			}
			if strings.Contains(got, "secret") {
				t.Errorf("describe() quotes the URL's credentials: %q", got)
			}
		})
	}
	if got := serverHost("https://user:secret@api.example.com:6443/path"); got != "api.example.com:6443" {
		t.Errorf("serverHost() = %q, want the host and port only", got)
	}
}
