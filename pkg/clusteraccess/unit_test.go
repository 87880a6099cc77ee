package clusteraccess

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/pkg/kubeconfig"
)

func TestNames(t *testing.T) {
	long := strings.Repeat("p", 200) + ".example.com"
	cases := map[string]struct {
		reason string
		got    []string
	}{
		"MCPAccessRequest": {
			reason: "names are valid for the request and its Secret, also for long provider names",
			got: []string{
				MCPAccessRequestName("velero", "team-a", "tenant"),
				MCPAccessRequestName(long, strings.Repeat("n", 63), strings.Repeat("m", 63)),
			},
		},
		"Workload":      {reason: "valid", got: []string{WorkloadRequestName("velero"), WorkloadRequestName(long)}},
		"Request":       {reason: "valid", got: []string{RequestName("velero", "onboarding-run"), RequestName(long, "onboarding-init")}},
		"ProviderLabel": {reason: "valid label values", got: []string{labelValue(long), labelValue("velero")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, n := range tc.got {
				errs := validation.IsDNS1123Subdomain(n + ".kubeconfig")
				if name == "ProviderLabel" {
					errs = validation.IsValidLabelValue(n)
				}
				if len(errs) > 0 {
					t.Errorf("%s: %q is invalid: %v", tc.reason, n, errs)
				}
			}
		})
	}
	if first, again := MCPAccessRequestName("p", "a", "b"), MCPAccessRequestName("p", "a", "b"); first != again {
		t.Errorf("the MCP AccessRequest name is not deterministic: %q, then %q", first, again)
	}
	// "a/b-c" and "a-b/c" must not collide, nor differ only in namespace.
	distinct := map[string]bool{}
	for _, k := range [][2]string{{"a", "b-c"}, {"a-b", "c"}, {"x", "tenant"}, {"y", "tenant"}} {
		distinct[MCPAccessRequestName("p", k[0], k[1])] = true
	}
	if len(distinct) != 4 {
		t.Errorf("MCP AccessRequest names collide: %v", distinct)
	}
	if got := labelValue("velero"); got != "velero" {
		t.Errorf("labelValue(%q) = %q, want it unchanged", "velero", got)
	}
	if err := validateRequestName("p", "Not_Valid"); err == nil {
		t.Errorf("validateRequestName accepted an invalid name")
	}
}

func TestPermissionsToken(t *testing.T) {
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	role := clustersv1alpha1.PermissionsRequest{Namespace: "velero", Rules: rules}
	cases := map[string]struct {
		reason string
		p      Permissions
		want   *clustersv1alpha1.TokenConfig
	}{
		"Nothing": {
			reason: "no permissions ask for nothing (least privilege), not for an empty role",
			want:   &clustersv1alpha1.TokenConfig{},
		},
		"RulesFirst": {
			reason: "cluster-wide rules become the first (cluster) role, then the roles, and role refs as given",
			p:      Permissions{Rules: rules, Roles: []clustersv1alpha1.PermissionsRequest{role}, RoleRefs: []common.RoleRef{ClusterAdmin}},
			want: &clustersv1alpha1.TokenConfig{
				Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: rules}, role},
				RoleRefs:    []common.RoleRef{ClusterAdmin},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.p.token()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if len(tc.p.Rules) > 0 {
				got.Permissions[0].Rules[0].Verbs[0] = "changed"
				if tc.p.Rules[0].Verbs[0] == "changed" {
					t.Errorf("token() shares the caller's rules")
				}
			}
		})
	}
}

func TestGrantedSecret(t *testing.T) {
	ready := []metav1.Condition{{Type: common.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "RoleConflict", Message: "ClusterRole x exists"}}
	ar := func(gen, observed int64, phase string, ref *common.ObjectReference, deleting bool) *clustersv1alpha1.AccessRequest {
		a := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "sp-x", Generation: gen}}
		a.Status.ObservedGeneration, a.Status.Phase, a.Status.SecretRef, a.Status.Conditions = observed, phase, ref, ready
		if deleting {
			now := metav1.Now()
			a.DeletionTimestamp = &now
		}
		return a
	}
	ref := &common.ObjectReference{Name: "r.kubeconfig"}
	cases := map[string]struct {
		reason string
		ar     *clustersv1alpha1.AccessRequest
		want   types.NamespacedName
		ok     bool
		denied bool
	}{
		"Granted":     {reason: "the Secret, in the request's namespace when the reference has none", ar: ar(2, 2, clustersv1alpha1.RequestGranted, ref, false), want: types.NamespacedName{Namespace: "sp-x", Name: "r.kubeconfig"}, ok: true},
		"SpecUnseen":  {reason: "a granted request whose new spec the operator has not seen is pending", ar: ar(3, 2, clustersv1alpha1.RequestGranted, ref, false)},
		"Pending":     {reason: "pending", ar: ar(1, 1, clustersv1alpha1.RequestPending, nil, false)},
		"NoSecretRef": {reason: "granted without a Secret is pending", ar: ar(1, 1, clustersv1alpha1.RequestGranted, nil, false)},
		"Deleting":    {reason: "a request being deleted is not used", ar: ar(1, 1, clustersv1alpha1.RequestGranted, ref, true)},
		"Denied":      {reason: "denied is an error", ar: ar(1, 1, clustersv1alpha1.RequestDenied, nil, false), denied: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok, err := grantedSecret(tc.ar)
			if tc.denied != errors.Is(err, ErrAccessDenied) || (err != nil && !strings.Contains(err.Error(), "RoleConflict: ClusterRole x exists")) {
				t.Errorf("%s: error %v", tc.reason, err)
			}
			if got != tc.want || ok != tc.ok {
				t.Errorf("%s: got %v, %v; want %v, %v", tc.reason, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// kubeconfigFor renders a kubeconfig for server (trusting the CA ca) with a
// bearer token.
func kubeconfigFor(t *testing.T, server string, ca []byte, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRestConfigFromKubeconfig(t *testing.T) {
	const secretToken = "s3cr3t-token-value"
	exec := clientcmdapi.NewConfig()
	exec.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://x"}
	exec.AuthInfos["u"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "steal", APIVersion: "client.authentication.k8s.io/v1"}}
	exec.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	exec.CurrentContext = "c"
	execData, err := clientcmd.Write(*exec)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		data   []byte
		ok     bool
	}{
		"Token":    {reason: "a token kubeconfig is used", data: kubeconfigFor(t, "https://x", nil, secretToken), ok: true},
		"Empty":    {reason: "empty data is an error", data: nil},
		"Garbage":  {reason: "the parse error must not quote the input", data: []byte("token: " + secretToken + "\n\t: ][")},
		"Exec":     {reason: "credential plugins are refused", data: execData},
		"NoServer": {reason: "a kubeconfig without a server is refused", data: kubeconfigFor(t, "", nil, secretToken)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := kubeconfig.Parse(tc.data)
			if tc.ok != (err == nil) {
				t.Fatalf("%s: got %v", tc.reason, err)
			}
			if err != nil && strings.Contains(err.Error(), secretToken) {
				t.Errorf("the error quotes the token: %v", err)
			}
			if tc.ok && cfg.BearerToken != secretToken {
				t.Errorf("BearerToken not read")
			}
		})
	}
}

// TestRefreshingConfig checks that a cluster of Request reads its token
// from the Secret: again after the refresh interval, and at once after the
// API server rejected it.
func TestRefreshingConfig(t *testing.T) {
	cases := map[string]struct {
		reason   string
		interval time.Duration
		// want are the status codes of the requests after the token was
		// replaced.
		want []int
	}{
		"AfterInterval": {
			reason:   "once the refresh interval is over, the next request uses the new token",
			interval: 0,
			want:     []int{http.StatusOK},
		},
		"AfterRejection": {
			reason:   "within the interval the old token is used until the API server rejects it; the next request uses the new one",
			interval: time.Hour,
			want:     []int{http.StatusUnauthorized, http.StatusOK},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var current atomic.Value
			current.Store("token-1")
			// TLS: client-go sends no bearer token to plain HTTP servers.
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") != current.Load().(string) {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

			key := types.NamespacedName{Namespace: "sp-x", Name: "r.kubeconfig"}
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
				Data:       map[string][]byte{clustersv1alpha1.SecretKeyKubeconfig: kubeconfigFor(t, srv.URL, ca, "token-1")},
			}
			reader := fake.NewClientBuilder().WithObjects(secret).Build()
			m := &Manager{reader: reader, tokenInterval: tc.interval}
			cfg, err := kubeconfig.Parse(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
			if err != nil {
				t.Fatal(err)
			}
			m.refreshingConfig(cfg, key)
			if cfg.BearerToken != "" {
				t.Errorf("the static token is still in the config")
			}
			hc, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			get := func() int {
				t.Helper()
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/version", nil)
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				return resp.StatusCode
			}
			if code := get(); code != http.StatusOK {
				t.Fatalf("first request: %d", code)
			}
			// The operator replaces the token; the old one stops working.
			secret.Data[clustersv1alpha1.SecretKeyKubeconfig] = kubeconfigFor(t, srv.URL, ca, "token-2")
			if err := reader.Update(context.Background(), secret); err != nil {
				t.Fatal(err)
			}
			current.Store("token-2")
			var got []int
			for range tc.want {
				got = append(got, get())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got status codes):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestTimeoutKeepsThePendingState ends Request's wait while a read is in
// flight: the error still names the pending AccessRequest, not the read the
// deadline cut short (a loaded CI machine hit exactly this).
func TestTimeoutKeepsThePendingState(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clustersv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var accessReads atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			// Reads of the AccessRequest: the first two (ensure and
			// the first poll) answer; every later one hangs until the
			// wait ends, as a read on a slow API server does.
			if _, ok := obj.(*clustersv1alpha1.AccessRequest); ok && accessReads.Add(1) > 2 {
				<-ctx.Done()
				return fmt.Errorf("get: %w", ctx.Err())
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	m, err := New(c, "p", "ns", WithPollInterval(time.Millisecond), WithTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Request(t.Context(), clustersv1alpha1.PurposeOnboarding, "onboarding-x", Permissions{})
	if err == nil || !strings.Contains(err.Error(), "AccessRequest ns/"+RequestName("p", "onboarding-x")+" is Pending") {
		t.Errorf("Request() = %v, want a timeout naming the pending AccessRequest", err)
	}
	if n := accessReads.Load(); n < 3 {
		t.Errorf("the AccessRequest was read %d times, want a read cut short by the deadline", n)
	}
}
