package controller

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/marketplane/marketplane/pkg/spruntime"

	apiv1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
)

func TestVersion(t *testing.T) {
	cases := map[string]struct {
		reason     string
		spec       string
		offered    []string
		want       string
		wantReason string
	}{
		"DefaultIsFirstOffered": {
			reason: "an empty spec.version means the ProviderConfig's first version",
			spec:   "", offered: []string{"v2", "v1"}, want: "v2",
		},
		"Offered": {
			reason: "an offered version is used",
			spec:   "v1", offered: []string{"v2", "v1"}, want: "v1",
		},
		"NotOffered": {
			reason: "a version the ProviderConfig does not offer is invalid user input",
			spec:   "v9", offered: []string{"v1"}, wantReason: ReasonUnsupportedVersion,
		},
		"NothingOffered": {
			reason: "a ProviderConfig without versions cannot serve anything",
			spec:   "", offered: nil, wantReason: ReasonUnsupportedVersion,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := &apiv1alpha1.Sample{Spec: apiv1alpha1.SampleSpec{Version: tc.spec}}
			cfg := &apiv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: apiv1alpha1.ProviderConfigSpec{Versions: tc.offered}}
			got, err := version(obj, cfg)
			if tc.wantReason != "" {
				uerr, ok := spruntime.AsInvalidUserInput(err)
				if !ok || uerr.Reason != tc.wantReason {
					t.Fatalf("%s\nversion() error = %v, want invalid user input with reason %s", tc.reason, err, tc.wantReason)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%s\nversion() = %q, %v; want %q", tc.reason, got, err, tc.want)
			}
		})
	}
}

func TestCRDDiff(t *testing.T) {
	cases := map[string]struct {
		reason string
		change func(*apiextensionsv1.CustomResourceDefinition)
		want   string
	}{
		"Same": {
			reason: "what applyCRD wrote is up to date, whatever else the API server or others set",
			change: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Labels["other"] = "x"
				crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			},
		},
		"Version": {
			reason: "another version annotation is a difference",
			change: func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Annotations[VersionAnnotation] = "v0" },
			want:   "annotation " + VersionAnnotation,
		},
		"Schema": {
			reason: "a changed schema is a difference",
			change: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "changed"
			},
			want: "versions or schema",
		},
		"Scope": {
			reason: "a changed scope is a difference",
			change: func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Scope = apiextensionsv1.ClusterScoped },
			want:   "group, scope or names",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := desiredCRD("p", "v1")
			got := &apiextensionsv1.CustomResourceDefinition{}
			applyCRD(got, want)
			got = got.DeepCopy()
			tc.change(got)
			diff := crdDiff(want, got)
			if tc.want == "" && diff != "" || tc.want != "" && !strings.Contains(diff, tc.want) {
				t.Errorf("%s\ncrdDiff() = %q, want %q", tc.reason, diff, tc.want)
			}
		})
	}
}

func TestApplyCRDKeepsOthers(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{"team": "a"},
		Annotations: map[string]string{"note": "b"},
	}}
	applyCRD(crd, desiredCRD("p", "v1"))
	want := map[string]string{"team": "a", ManagedByLabel: "p"}
	if diff := cmp.Diff(want, crd.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantAnn := map[string]string{"note": "b", VersionAnnotation: "v1"}
	if diff := cmp.Diff(wantAnn, crd.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}

func TestWorkloadNamespace(t *testing.T) {
	a := &apiv1alpha1.Sample{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "cp"}}
	b := &apiv1alpha1.Sample{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "cp"}}
	if WorkloadNamespace("p", a) != WorkloadNamespace("p", a.DeepCopy()) {
		t.Error("WorkloadNamespace is not stable")
	}
	if WorkloadNamespace("p", a) == WorkloadNamespace("p", b) {
		t.Error("objects of the same name in different namespaces share a workload namespace")
	}
	// Two providers may offer kinds of the same name; a tenant who orders
	// both for one MCP has two objects of the same namespace and name.
	if WorkloadNamespace("p", a) == WorkloadNamespace("q", a) || ServerName("p", a) == ServerName("q", a) {
		t.Error("the objects of two providers with the same namespace and name share a workload namespace or server")
	}
	if msgs := validation.IsDNS1123Label(WorkloadNamespace("p", a)); len(msgs) > 0 {
		t.Errorf("WorkloadNamespace %q is not a valid namespace name: %v", WorkloadNamespace("p", a), msgs)
	}
}

// TestOwnedBy: only the provider's label and the object's UID make a
// namespace or Deployment in the workload cluster the object's; its name
// does not.
func TestOwnedBy(t *testing.T) {
	obj := &apiv1alpha1.Sample{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "cp", UID: "u1"}}
	cases := map[string]struct {
		reason string
		labels map[string]string
		want   bool
	}{
		"Mine":          {reason: "What the provider created for the object.", labels: ownerLabels("p", obj), want: true},
		"Orphaned":      {reason: "An earlier object of the same name, deleted with the Orphan policy, left it.", labels: map[string]string{ManagedByLabel: "p", OwnerUIDLabel: "u0"}, want: false},
		"OtherProvider": {reason: "Another provider's, even naming the same UID.", labels: map[string]string{ManagedByLabel: "q", OwnerUIDLabel: "u1"}, want: false},
		"NoUID":         {reason: "Labelled by the provider without a UID: nothing proves whose it is.", labels: map[string]string{ManagedByLabel: "p"}, want: false},
		"Unlabelled":    {reason: "Someone else's namespace of that name.", labels: nil, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := &metav1.ObjectMeta{Labels: tc.labels}
			if got := ownedBy(o, "p", obj); got != tc.want {
				t.Errorf("%s\nownedBy(%v) = %v, want %v", tc.reason, tc.labels, got, tc.want)
			}
		})
	}
	if ownedBy(&metav1.ObjectMeta{Labels: ownerLabels("p", &apiv1alpha1.Sample{})}, "p", &apiv1alpha1.Sample{}) {
		t.Error("an object without a UID owns what is labelled with an empty UID")
	}
}

// TestApplyServer: what applyServer makes of a new Deployment, and of one
// the API server defaulted and others annotated, is what serverDiff
// wants; a changed image or replica count is a difference, and applying
// repairs it without dropping the defaults.
func TestApplyServer(t *testing.T) {
	obj := &apiv1alpha1.Sample{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "cp"}}
	want := desiredServer("p", obj, &apiv1alpha1.Workload{Image: "example.org/server:v1"}, []corev1.LocalObjectReference{{Name: "s-regcred"}})
	if got := *want.Spec.Replicas; got != 1 {
		t.Errorf("replicas of an unset spec.workload.replicas = %d, want 1", got)
	}
	fresh := &appsv1.Deployment{}
	applyServer(fresh, want)
	if diff := serverDiff(want, fresh); diff != "" {
		t.Errorf("a new Deployment after applyServer differs: %s", diff)
	}

	defaulted := want.DeepCopy()
	defaulted.Annotations["deployment.kubernetes.io/revision"] = "3"
	defaulted.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	defaulted.Spec.Template.Spec.Containers[0].Image = "example.org/server:v0"
	defaulted.Spec.Replicas = ptr.To[int32](5)
	defaulted.Spec.Template.Spec.ImagePullSecrets = nil
	diff := serverDiff(want, defaulted)
	for _, part := range []string{"replicas are 5, want 1", "image example.org/server:v1", "image pull secrets are [], want [s-regcred]"} {
		if !strings.Contains(diff, part) {
			t.Errorf("serverDiff = %q, want it to mention %q", diff, part)
		}
	}
	applyServer(defaulted, want)
	if diff := serverDiff(want, defaulted); diff != "" {
		t.Errorf("after applyServer it still differs: %s", diff)
	}
	if c := defaulted.Spec.Template.Spec.Containers[0]; c.ImagePullPolicy != corev1.PullIfNotPresent || defaulted.Annotations["deployment.kubernetes.io/revision"] != "3" {
		t.Errorf("applyServer dropped what others set: container %+v, annotations %v", c, defaulted.Annotations)
	}
}

func TestServerAvailable(t *testing.T) {
	available := func(mutate func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ServerNamespace, Name: "s", Generation: 2},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
			Status: appsv1.DeploymentStatus{
				ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}},
			},
		}
		mutate(d)
		return d
	}
	cases := map[string]struct {
		reason  string
		d       *appsv1.Deployment
		want    bool
		wantMsg string
	}{
		"Available": {
			reason: "every replica is available and the controller saw the current spec",
			d:      available(func(*appsv1.Deployment) {}),
			want:   true,
		},
		"NoStatus": {
			reason:  "a new Deployment has no status yet",
			d:       available(func(d *appsv1.Deployment) { d.Status = appsv1.DeploymentStatus{} }),
			wantMsg: "has 0 of 2 replicas available",
		},
		"OneMissing": {
			reason:  "one replica is not available yet",
			d:       available(func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 1 }),
			wantMsg: "has 1 of 2 replicas available",
		},
		"OldGeneration": {
			reason: "the status is of an older spec",
			d:      available(func(d *appsv1.Deployment) { d.Generation = 3 }),
		},
		"NotAvailableCondition": {
			reason: "the controller says it is not Available",
			d: available(func(d *appsv1.Deployment) {
				d.Status.Conditions[0].Status = corev1.ConditionFalse
			}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, msg := serverAvailable(tc.d)
			if got != tc.want {
				t.Errorf("%s: serverAvailable = %v (%q), want %v", tc.reason, got, msg, tc.want)
			}
			if !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("%s: message %q, want it to contain %q", tc.reason, msg, tc.wantMsg)
			}
		})
	}
}

// TestProviderConfigToleratesBadDuration: a ProviderConfig stored before the
// API server checked spec.pollInterval still decodes (a decoding error
// would make the runtime's cache fail to list every ProviderConfig), and
// Validate reports the value, which the runtime turns into the reason
// InvalidProviderConfig on every object.
func TestProviderConfigToleratesBadDuration(t *testing.T) {
	cfg := &apiv1alpha1.ProviderConfig{}
	if err := json.Unmarshal([]byte(`{"spec":{"pollInterval":"often","versions":["v1"]}}`), cfg); err != nil {
		t.Fatalf("decode a ProviderConfig with pollInterval %q: %v; it must decode", "often", err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "spec.pollInterval") {
		t.Errorf("Validate() = %v, want an error naming spec.pollInterval", err)
	}
	if got := cfg.PollInterval(); got != 0 {
		t.Errorf("PollInterval() = %s for an invalid value, want 0 (the runtime's default)", got)
	}
	if err := json.Unmarshal([]byte(`{"spec":{"pollInterval":"30s","versions":["v1"]}}`), cfg); err != nil || cfg.Validate() != nil {
		t.Errorf("a valid pollInterval: decode %v, Validate %v; want both nil", err, cfg.Validate())
	}
}
