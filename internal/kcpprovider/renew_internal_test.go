package kcpprovider

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

func TestRenewAt(t *testing.T) {
	ws := &workspace{URL: "https://kcp/clusters/root:mp-1", LogicalCluster: "lc1"}
	secret := func(mutate func(*corev1.Secret)) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{WorkspaceAnnotation: "root:mp-1", LogicalClusterAnnotation: "lc1"}},
			Data: map[string][]byte{
				clustersv1alpha1.SecretKeyKubeconfig:          []byte("kc"),
				clustersv1alpha1.SecretKeyHost:                []byte(ws.URL),
				clustersv1alpha1.SecretKeyCreationTimestamp:   []byte("1000"),
				clustersv1alpha1.SecretKeyExpirationTimestamp: []byte("2000"),
			},
		}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	type want struct {
		at time.Time
		ok bool
	}
	cases := map[string]struct {
		reason string
		secret *corev1.Secret
		want   want
	}{
		"Current": {
			reason: "renewal after 80 % of the token's 1000 s",
			secret: secret(nil),
			want:   want{at: time.Unix(1800, 0), ok: true},
		},
		"None":                {reason: "no Secret yet", secret: nil},
		"OtherWorkspace":      {reason: "a Secret of another workspace", secret: secret(func(s *corev1.Secret) { s.Annotations[WorkspaceAnnotation] = "root:mp-2" })},
		"RecreatedWorkspace":  {reason: "the workspace was created again: tokens of the old one are void", secret: secret(func(s *corev1.Secret) { s.Annotations[LogicalClusterAnnotation] = "lc0" })},
		"OtherServer":         {reason: "the workspace moved", secret: secret(func(s *corev1.Secret) { s.Data[clustersv1alpha1.SecretKeyHost] = []byte("https://old") })},
		"NoKubeconfig":        {reason: "someone emptied it", secret: secret(func(s *corev1.Secret) { delete(s.Data, clustersv1alpha1.SecretKeyKubeconfig) })},
		"NoTimes":             {reason: "no token times", secret: secret(func(s *corev1.Secret) { delete(s.Data, clustersv1alpha1.SecretKeyExpirationTimestamp) })},
		"ExpiresBeforeIssued": {reason: "nonsense times", secret: secret(func(s *corev1.Secret) { s.Data[clustersv1alpha1.SecretKeyExpirationTimestamp] = []byte("900") })},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			at, ok := renewAt(tc.secret, "root:mp-1", ws)
			if diff := cmp.Diff(tc.want, want{at: at, ok: ok}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s: renewAt (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWorkspacePath(t *testing.T) {
	cases := map[string]string{
		"https://127.0.0.1:6443/clusters/root":      "root",
		"https://127.0.0.1:6443/clusters/root:org/": "root:org",
		"https://127.0.0.1:6443":                    "root",
	}
	for host, want := range cases {
		got, err := workspacePath(host)
		if err != nil || got != want {
			t.Errorf("workspacePath(%q) = %q, %v; want %q", host, got, err, want)
		}
	}
}

func TestWorkspaceName(t *testing.T) {
	a, b := WorkspaceName("uid-a"), WorkspaceName("uid-b")
	if a == b || len(a) != len(WorkspacePrefix)+16 || a != WorkspaceName("uid-a") {
		t.Errorf("WorkspaceName: %q, %q: want distinct, stable names of %d characters", a, b, len(WorkspacePrefix)+16)
	}
}
