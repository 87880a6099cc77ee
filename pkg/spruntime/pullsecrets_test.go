package spruntime_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// pullSecretEnv is a source namespace on the platform cluster and a target
// namespace on the MCP cluster (standing in for a workload cluster), both
// new for the test.
type pullSecretEnv struct {
	src, dst string
	p        spruntime.PullSecrets
	target   spruntime.PullSecretTarget
}

func newPullSecretEnv(t *testing.T) *pullSecretEnv {
	t.Helper()
	testenv.SkipIfShort(t)
	if platform == nil {
		t.Fatal(errMissingTestEnvironment)
	}
	n := providerCounter.Add(1)
	e := &pullSecretEnv{src: fmt.Sprintf("pull-src-%d", n), dst: fmt.Sprintf("pull-dst-%d", n)}
	ctx := context.Background()
	if err := platformC.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.src}}); err != nil {
		t.Fatal(err)
	}
	if err := mcpC.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.dst}}); err != nil {
		t.Fatal(err)
	}
	e.p = spruntime.PullSecrets{Source: platformC, SourceNamespace: e.src, Provider: fmt.Sprintf("prov-%d", n)}
	e.target = spruntime.PullSecretTarget{Client: mcpC, Namespace: e.dst}
	return e
}

// source creates or updates the platform Secret name with type typ and
// the registry auth data.
func (e *pullSecretEnv) source(t *testing.T, name string, typ corev1.SecretType, data string) {
	t.Helper()
	key := corev1.DockerConfigJsonKey
	if typ == corev1.SecretTypeDockercfg {
		key = corev1.DockerConfigKey
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.src, Name: name}, Type: typ, Data: map[string][]byte{key: []byte(data)}}
	ctx := context.Background()
	got := &corev1.Secret{}
	if err := platformC.Get(ctx, client.ObjectKeyFromObject(s), got); err == nil {
		got.Data = s.Data
		if err := platformC.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := platformC.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// copyOf returns the Secret name in the target namespace, nil when there
// is none.
func (e *pullSecretEnv) copyOf(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := mcpC.Get(context.Background(), client.ObjectKey{Namespace: e.dst, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return s
}

func refs(names ...string) []corev1.LocalObjectReference {
	out := make([]corev1.LocalObjectReference, 0, len(names))
	for _, n := range names {
		out = append(out, corev1.LocalObjectReference{Name: n})
	}
	return out
}

// wantReason checks that err is an InvalidUserInput of reason whose
// message names what.
func wantReason(t *testing.T, err error, reason, what string) {
	t.Helper()
	uerr, ok := spruntime.AsInvalidUserInput(err)
	if !ok {
		t.Fatalf("error %v, want an InvalidUserInput with reason %s", err, reason)
	}
	if uerr.Reason != reason || !strings.Contains(uerr.Message, what) {
		t.Fatalf("error %s: %q, want reason %s naming %q", uerr.Reason, uerr.Message, reason, what)
	}
}

// Sync copies the named pull secrets with their type and data, labelled as
// the provider's, updates a copy when its source is rotated, deletes the
// copy of a name dropped from the list, and Remove deletes the rest. Diff
// sees each difference first. No data reaches the log.
func TestPullSecretsSync(t *testing.T) {
	t.Parallel()
	e := newPullSecretEnv(t)
	ctx := context.Background()
	e.source(t, "regcred", corev1.SecretTypeDockerConfigJson, `{"auths":{"r.example":{"auth":"c2VjcmV0LW9uZQ=="}}}`)
	e.source(t, "oldcred", corev1.SecretTypeDockercfg, `{"r.example":{"auth":"b2xkLXNlY3JldA=="}}`)

	if diff, err := e.p.Diff(ctx, e.target, refs("regcred", "oldcred")); err != nil || !strings.Contains(diff, "missing") {
		t.Fatalf("Diff before Sync = %q, %v; want the copies missing", diff, err)
	}
	got, err := e.p.Sync(ctx, e.target, refs("regcred", "oldcred", "regcred"))
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if want := refs("regcred", "oldcred"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Sync returned %v, want %v", got, want)
	}
	for name, typ := range map[string]corev1.SecretType{"regcred": corev1.SecretTypeDockerConfigJson, "oldcred": corev1.SecretTypeDockercfg} {
		c := e.copyOf(t, name)
		if c == nil {
			t.Fatalf("no copy of %s in %s", name, e.dst)
		}
		if c.Type != typ || c.Labels[providerv1alpha1.ManagedByLabel] != e.p.Provider || c.Labels[providerv1alpha1.ManagedPurposeLabel] != spruntime.PullSecretPurpose {
			t.Errorf("copy %s: type %s, labels %v", name, c.Type, c.Labels)
		}
	}
	if diff, err := e.p.Diff(ctx, e.target, refs("regcred", "oldcred")); err != nil || diff != "" {
		t.Fatalf("Diff after Sync = %q, %v; want none", diff, err)
	}

	// A rotated pull secret reaches the copy.
	e.source(t, "regcred", corev1.SecretTypeDockerConfigJson, `{"auths":{"r.example":{"auth":"c2VjcmV0LXR3bw=="}}}`)
	if diff, err := e.p.Diff(ctx, e.target, refs("regcred", "oldcred")); err != nil || !strings.Contains(diff, "differs from its source") {
		t.Fatalf("Diff after rotation = %q, %v; want the copy stale", diff, err)
	}
	if _, err := e.p.Sync(ctx, e.target, refs("regcred", "oldcred")); err != nil {
		t.Fatalf("Sync after rotation: %v", err)
	}
	if c := e.copyOf(t, "regcred"); !strings.Contains(string(c.Data[corev1.DockerConfigJsonKey]), "c2VjcmV0LXR3bw==") {
		t.Errorf("copy after rotation holds the old data")
	}

	// A dropped name loses its copy; the other stays.
	if diff, err := e.p.Diff(ctx, e.target, refs("regcred")); err != nil || !strings.Contains(diff, "oldcred is no longer wanted") {
		t.Fatalf("Diff after dropping oldcred = %q, %v", diff, err)
	}
	if _, err := e.p.Sync(ctx, e.target, refs("regcred")); err != nil {
		t.Fatalf("Sync without oldcred: %v", err)
	}
	if e.copyOf(t, "oldcred") != nil {
		t.Errorf("the copy of the dropped oldcred is still there")
	}
	if e.copyOf(t, "regcred") == nil {
		t.Errorf("the copy of regcred went too")
	}

	// Remove (Delete's cleanup) deletes the rest.
	if err := e.p.Remove(ctx, e.target); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if e.copyOf(t, "regcred") != nil {
		t.Errorf("the copy of regcred is still there after Remove")
	}
	for _, secret := range []string{"c2VjcmV0LW9uZQ==", "c2VjcmV0LXR3bw==", "b2xkLXNlY3JldA=="} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds pull secret data")
		}
	}
}

// A Secret of the copy's name that is not the provider's copy (a
// tenant's, another provider's, another owner's) is neither overwritten
// nor deleted: Sync fails naming it.
func TestPullSecretsForeignSecret(t *testing.T) {
	t.Parallel()
	e := newPullSecretEnv(t)
	ctx := context.Background()
	e.source(t, "regcred", corev1.SecretTypeDockerConfigJson, `{"auths":{}}`)
	tenant := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.dst, Name: "regcred"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"tenant":{}}}`)},
	}
	if err := mcpC.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	_, err := e.p.Sync(ctx, e.target, refs("regcred"))
	wantReason(t, err, spruntime.ReasonPullSecretConflict, e.dst+"/regcred")
	_, err = e.p.Diff(ctx, e.target, refs("regcred"))
	wantReason(t, err, spruntime.ReasonPullSecretConflict, e.dst+"/regcred")
	if err := e.p.Remove(ctx, e.target); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	c := e.copyOf(t, "regcred")
	if c == nil || string(c.Data[corev1.DockerConfigJsonKey]) != `{"auths":{"tenant":{}}}` || len(c.Labels) != 0 {
		t.Fatalf("the tenant's Secret was changed or deleted: %v", c)
	}

	// Another owner's copy in the same namespace is not ours either.
	other := e.target
	other.Owner = "other"
	if _, err := e.p.Sync(ctx, other, refs("regcred")); err == nil {
		t.Fatalf("Sync for owner other took over the tenant's Secret")
	}
	other.Prefix = "other-"
	if _, err := e.p.Sync(ctx, other, refs("regcred")); err != nil {
		t.Fatalf("Sync for owner other with a prefix: %v", err)
	}
	mine := e.target
	mine.Owner, mine.Prefix = "mine", "other-"
	_, err = e.p.Sync(ctx, mine, refs("regcred"))
	wantReason(t, err, spruntime.ReasonPullSecretConflict, e.dst+"/other-regcred")
	if err := e.p.Remove(ctx, mine); err != nil {
		t.Fatalf("Remove for owner mine: %v", err)
	}
	if e.copyOf(t, "other-regcred") == nil {
		t.Errorf("Remove for owner mine deleted owner other's copy")
	}
}

// A name the ProviderConfig lists that has no Secret on the platform
// cluster, or whose Secret is no pull secret, fails naming it, and
// nothing is copied.
func TestPullSecretsBadSource(t *testing.T) {
	t.Parallel()
	e := newPullSecretEnv(t)
	ctx := context.Background()
	e.source(t, "regcred", corev1.SecretTypeDockerConfigJson, `{"auths":{}}`)
	_, err := e.p.Sync(ctx, e.target, refs("regcred", "nosuch"))
	wantReason(t, err, spruntime.ReasonPullSecretMissing, e.src+"/nosuch")
	_, err = e.p.Diff(ctx, e.target, refs("nosuch"))
	wantReason(t, err, spruntime.ReasonPullSecretMissing, e.src+"/nosuch")

	opaque := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.src, Name: "kubeconfig"}, Data: map[string][]byte{"kubeconfig": []byte("x")}}
	if err := platformC.Create(ctx, opaque); err != nil {
		t.Fatal(err)
	}
	_, err = e.p.Sync(ctx, e.target, refs("kubeconfig"))
	wantReason(t, err, spruntime.ReasonInvalidPullSecret, e.src+"/kubeconfig")
	_, err = e.p.Sync(ctx, e.target, refs(""))
	wantReason(t, err, spruntime.ReasonInvalidPullSecret, "no name")
	for _, name := range []string{"regcred", "nosuch", "kubeconfig"} {
		if e.copyOf(t, name) != nil {
			t.Errorf("%s was copied although Sync failed", name)
		}
	}
}
