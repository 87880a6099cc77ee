package clusters

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
)

func cluster(name string, tenancy clustersv1alpha1.Tenancy, ready bool, tenants int, purposes ...string) clustersv1alpha1.Cluster {
	c := clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       clustersv1alpha1.ClusterSpec{Tenancy: tenancy, Purposes: purposes},
	}
	for i := range tenants {
		c.Finalizers = append(c.Finalizers, clustersv1alpha1.RequestFinalizerOnClusterPrefix+name+string(rune('a'+i)))
	}
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	c.Status.Conditions = []metav1.Condition{{Type: common.ConditionTypeReady, Status: status}}
	return c
}

func TestChoose(t *testing.T) {
	deleting := cluster("deleting", clustersv1alpha1.TenancyShared, true, 0, "workload")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	cases := map[string]struct {
		reason  string
		list    []clustersv1alpha1.Cluster
		purpose string
		tenancy clustersv1alpha1.Tenancy
		want    string
	}{
		"SharedFewestTenants": {
			reason:  "a Shared request goes to the fitting cluster with the fewest tenants",
			list:    []clustersv1alpha1.Cluster{cluster("a", "Shared", true, 2, "workload"), cluster("b", "Shared", true, 1, "workload"), cluster("c", "Shared", true, 3, "workload")},
			purpose: "workload", tenancy: "Shared", want: "b",
		},
		"SharedTieByName": {
			reason:  "ties go to the first name",
			list:    []clustersv1alpha1.Cluster{cluster("b", "Shared", true, 1, "workload"), cluster("a", "Shared", true, 1, "workload")},
			purpose: "workload", tenancy: "Shared", want: "a",
		},
		"SkipsNotReady": {
			reason:  "a cluster that is not Ready is not chosen",
			list:    []clustersv1alpha1.Cluster{cluster("a", "Shared", false, 0, "workload"), cluster("b", "Shared", true, 5, "workload")},
			purpose: "workload", tenancy: "Shared", want: "b",
		},
		"SkipsOtherPurpose": {
			reason:  "a cluster of another purpose is not chosen",
			list:    []clustersv1alpha1.Cluster{cluster("a", "Shared", true, 0, "onboarding"), cluster("b", "Shared", true, 5, "onboarding", "workload")},
			purpose: "workload", tenancy: "Shared", want: "b",
		},
		"SkipsOtherTenancy": {
			reason:  "an Exclusive cluster does not serve Shared requests",
			list:    []clustersv1alpha1.Cluster{cluster("a", "Exclusive", true, 0, "workload")},
			purpose: "workload", tenancy: "Shared", want: "",
		},
		"SkipsDeleting": {
			reason:  "a cluster being deleted is not chosen",
			list:    []clustersv1alpha1.Cluster{deleting},
			purpose: "workload", tenancy: "Shared", want: "",
		},
		"ExclusiveFree": {
			reason:  "an Exclusive request gets a cluster without tenants",
			list:    []clustersv1alpha1.Cluster{cluster("a", "Exclusive", true, 1, "mcp"), cluster("b", "Exclusive", true, 0, "mcp")},
			purpose: "mcp", tenancy: "Exclusive", want: "b",
		},
		"ExclusiveNoneFree": {
			reason:  "no free Exclusive cluster means none",
			list:    []clustersv1alpha1.Cluster{cluster("a", "Exclusive", true, 1, "mcp")},
			purpose: "mcp", tenancy: "Exclusive", want: "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if c := choose(tc.list, tc.purpose, tc.tenancy); c != nil {
				got = c.Name
			}
			if got != tc.want {
				t.Errorf("%s: choose() = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Min: 5 * time.Second, Max: time.Minute}
	since := time.Unix(1000, 0)
	cases := map[string]struct {
		failingFor time.Duration
		want       time.Duration
	}{
		"JustFailed":     {0, 5 * time.Second},
		"FailingFor7s":   {7 * time.Second, 7 * time.Second},
		"FailingForLong": {time.Hour, time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := b.After(since, since.Add(tc.failingFor)); got != tc.want {
				t.Errorf("After() = %s, want %s", got, tc.want)
			}
		})
	}
	t.Run("ReadyConditionGivesMin", func(t *testing.T) {
		conds := []metav1.Condition{{Type: common.ConditionTypeReady, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)}}
		if got := b.ForConditions(conds, since.Add(time.Hour)); got != b.Min {
			t.Errorf("ForConditions() = %s, want %s", got, b.Min)
		}
	})
	t.Run("NotReadySinceTransition", func(t *testing.T) {
		conds := []metav1.Condition{{Type: common.ConditionTypeReady, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(since)}}
		if got := b.ForConditions(conds, since.Add(20*time.Second)); got != 20*time.Second {
			t.Errorf("ForConditions() = %s, want 20s", got)
		}
	})
}

func TestVersionLabelValue(t *testing.T) {
	cases := map[string]string{
		"v1.36.3":        "1.36.3",
		"v1.30.1+k3s1":   "1.30.1",
		"v1.29.0-gke.12": "1.29.0",
		"garbage":        "",
	}
	for in, want := range cases {
		if got := versionLabelValue(in); got != want {
			t.Errorf("versionLabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSetEndpoint(t *testing.T) {
	c := &clustersv1alpha1.Cluster{}
	c.Status.Endpoints = []clustersv1alpha1.Endpoint{{Name: "apiserver-internal", URL: "https://in"}, {Name: "apiserver-external", URL: "https://old"}}
	setEndpoint(c, "apiserver-external", "https://new")
	want := []clustersv1alpha1.Endpoint{{Name: "apiserver-internal", URL: "https://in"}, {Name: "apiserver-external", URL: "https://new"}}
	if diff := cmp.Diff(want, c.Status.Endpoints); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}

// secretReader serves one Secret, or an error, to AdminConfig.
type secretReader struct {
	client.Reader
	secret *corev1.Secret
	err    error
}

func (r secretReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if r.err != nil {
		return r.err
	}
	if r.secret == nil || key.Name != r.secret.Name || key.Namespace != r.secret.Namespace {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	r.secret.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func kubeconfigBytes(t *testing.T, mutate func(*clientcmdapi.Config)) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "s3cr3t-token"}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if mutate != nil {
		mutate(cfg)
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAdminConfig(t *testing.T) {
	annotated := &clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{
		Name: "c", Namespace: "ns", Annotations: map[string]string{KubeconfigSecretAnnotation: "kc"},
	}}
	secret := func(data []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kc", Namespace: "ns"}, Data: map[string][]byte{KubeconfigSecretKey: data}}
	}
	cases := map[string]struct {
		reason   string
		cluster  *clustersv1alpha1.Cluster
		reader   secretReader
		wantErr  error
		wantHost string
	}{
		"NoAnnotation": {
			reason:  "a Cluster without the annotation has no kubeconfig",
			cluster: &clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
			wantErr: ErrKubeconfigMissing,
		},
		"SecretMissing": {
			reason:  "a missing Secret is ErrKubeconfigMissing",
			cluster: annotated, wantErr: ErrKubeconfigMissing,
		},
		"KeyMissing": {
			reason:  "a Secret without the key is ErrKubeconfigMissing",
			cluster: annotated,
			reader:  secretReader{secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kc", Namespace: "ns"}}},
			wantErr: ErrKubeconfigMissing,
		},
		"Garbage": {
			reason:  "unparsable content is ErrKubeconfigInvalid",
			cluster: annotated, reader: secretReader{secret: secret([]byte("s3cr3t: [unclosed"))},
			wantErr: ErrKubeconfigInvalid,
		},
		"NoServer": {
			reason:  "a kubeconfig without a server is ErrKubeconfigInvalid",
			cluster: annotated,
			reader: secretReader{secret: secret(kubeconfigBytes(t, func(c *clientcmdapi.Config) {
				c.Clusters["c"].Server = ""
			}))},
			wantErr: ErrKubeconfigInvalid,
		},
		"ExecPlugin": {
			reason:  "an exec plugin would run a command inside the operator",
			cluster: annotated,
			reader: secretReader{secret: secret(kubeconfigBytes(t, func(c *clientcmdapi.Config) {
				c.AuthInfos["u"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
			}))},
			wantErr: ErrKubeconfigInvalid,
		},
		"ReadError": {
			reason:  "other read errors are transient, not user errors",
			cluster: annotated, reader: secretReader{err: errors.New("connection reset")},
		},
		"Valid": {
			reason:  "a valid kubeconfig gives its server",
			cluster: annotated, reader: secretReader{secret: secret(kubeconfigBytes(t, nil))},
			wantHost: "https://127.0.0.1:6443",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := AdminConfig(t.Context(), tc.reader, tc.cluster)
			if tc.wantHost != "" {
				if err != nil || cfg.Host != tc.wantHost {
					t.Fatalf("%s: AdminConfig() = %v, %v; want host %s", tc.reason, cfg, err, tc.wantHost)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s: AdminConfig() succeeded, want an error", tc.reason)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("%s: the error quotes the kubeconfig: %v", tc.reason, err)
			}
			_, user := ReasonFor(err)
			if tc.wantErr == nil {
				if user {
					t.Errorf("%s: error %v is a user error, want a transient one", tc.reason, err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: error %v, want %v", tc.reason, err, tc.wantErr)
			}
		})
	}
}
