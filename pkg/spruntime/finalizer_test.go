package spruntime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/spruntime/internal/testapi"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestAddFinalizer shows that adding the runtime's finalizer to an object
// read before someone else wrote it conflicts only when the finalizers
// changed: a broker that writes an SFServiceInstance's status right after
// creating it must not cost the provisioner a failed write and a retry.
func TestAddFinalizer(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Parallel()
	ctx := context.Background()
	const ns, ours = "add-finalizer", "example.com/finalizer"
	if err := onboardingC.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	writeStatus := func(o *testapi.TestService) error {
		o.Status.Phase = "Written"
		return onboardingC.Status().Update(ctx, o)
	}
	addLabel := func(o *testapi.TestService) error {
		o.Labels = map[string]string{"written": "since"}
		return onboardingC.Update(ctx, o)
	}
	addFinalizer := func(o *testapi.TestService) error {
		o.Finalizers = append(o.Finalizers, "example.com/other")
		return onboardingC.Update(ctx, o)
	}

	tests := map[string]struct {
		reason     string
		finalizers []string
		// since writes the object after the stale copy was read.
		since    func(*testapi.TestService) error
		conflict bool
		want     []string
		// current: the object in memory gets the server's
		// resourceVersion, not only its finalizers.
		current bool
	}{
		"StatusWritten": {
			reason:     "A status write does not make the add conflict, and the object in memory is current but for its status.",
			finalizers: []string{"example.com/broker"},
			since:      writeStatus,
			want:       []string{"example.com/broker", ours},
			current:    true,
		},
		"LabelsChanged": {
			reason:     "A metadata change does not make the add conflict, but the object in memory keeps its resourceVersion, so that a locked write cannot undo the change.",
			finalizers: []string{"example.com/broker"},
			since:      addLabel,
			want:       []string{"example.com/broker", ours},
		},
		"FinalizersChanged": {
			reason:     "A concurrent change of the finalizers makes the add conflict, so that it is not lost.",
			finalizers: []string{"example.com/broker"},
			since:      addFinalizer,
			conflict:   true,
			want:       []string{"example.com/broker", "example.com/other"},
		},
		"NoFinalizersStatusWritten": {
			reason:   "Without finalizers to test, the add is locked by resourceVersion, as before.",
			since:    writeStatus,
			conflict: true,
		},
		"NoFinalizersCurrent": {
			reason:  "An object read after the last write gets the finalizer.",
			want:    []string{ours},
			current: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := &testapi.TestService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(name), Finalizers: tc.finalizers}}
			if err := onboardingC.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
			stale := obj.DeepCopy()
			if tc.since != nil {
				if err := tc.since(obj); err != nil {
					t.Fatal(err)
				}
			}
			err := spruntime.AddFinalizer(ctx, onboardingC, stale, ours)
			if got := apierrors.IsConflict(err); got != tc.conflict || (err != nil && !got) {
				t.Fatalf("%s\nAddFinalizer: %v, want conflict=%v", tc.reason, err, tc.conflict)
			}
			now := &testapi.TestService{}
			if err := onboardingC.Get(ctx, client.ObjectKeyFromObject(obj), now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, now.Finalizers); diff != "" {
				t.Errorf("%s\nfinalizers on the server, -want +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			if !cmp.Equal(now.Finalizers, stale.Finalizers) {
				t.Errorf("%s\nfinalizers in memory %v, want the server's %v", tc.reason, stale.Finalizers, now.Finalizers)
			}
			if got := stale.ResourceVersion == now.ResourceVersion; got != tc.current {
				t.Errorf("%s\nresourceVersion in memory %s, server %s; want them equal: %v", tc.reason, stale.ResourceVersion, now.ResourceVersion, tc.current)
			}
		})
	}
}
