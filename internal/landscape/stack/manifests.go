package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/marketplane/marketplane/pkg/manifests"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/pkg/crdinstall"
)

// ManifestFieldOwner is the field manager of the objects the landscape
// applies from --manifest files.
const ManifestFieldOwner = "marketplane-landscape"

// manifest is one object of a --manifest file.
type manifest struct {
	file string
	obj  *unstructured.Unstructured
}

func (m manifest) String() string {
	s := m.obj.GetKind() + " " + m.obj.GetName()
	if ns := m.obj.GetNamespace(); ns != "" {
		s = m.obj.GetKind() + " " + ns + "/" + m.obj.GetName()
	}
	return s + " (" + filepath.Base(m.file) + ")"
}

// readManifests reads the objects of YAML or JSON files (several documents
// per file allowed), so that a typo is reported before anything starts.
func readManifests(files []string) ([]manifest, error) {
	var out []manifest
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		objs, err := manifests.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", f, err)
		}
		for i, o := range objs {
			if o.GetKind() == "" || o.GetAPIVersion() == "" || o.GetName() == "" {
				return nil, fmt.Errorf("manifest %s: object %d has no apiVersion, kind or metadata.name", f, i)
			}
			out = append(out, manifest{file: f, obj: o})
		}
	}
	return out, nil
}

// CheckManifests reports a manifest file that cannot be read or decoded.
func CheckManifests(files []string) error {
	_, err := readManifests(files)
	return err
}

// AddManifests adds a step that applies the objects of files to the
// platform cluster, after the other steps: a user's own providers
// (ServiceProvider, ClusterProvider, PlatformService; their images mapped
// with --image-map) and whatever goes with them, such as a ProviderConfig.
// Objects are applied in file order with server-side apply, so a resumed
// landscape applies them again without conflict. An object whose kind a
// provider's init installs is applied once that CRD is Established. The
// step ends when every provider object of the files is Ready, and fails
// at once when one of them cannot become Ready (its init failed, or a run
// process exited).
func AddManifests(l *landscape.Landscape, files []string) error {
	objs, err := readManifests(files)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return nil
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	l.AddStep("your manifests ("+strings.Join(names, ", ")+")", func(ctx context.Context, l *landscape.Landscape) error {
		return applyManifests(ctx, l, objs, l.StartTimeout())
	})
	return nil
}

// applyManifests applies objs in order and waits for the provider objects
// among them to be Ready.
func applyManifests(ctx context.Context, l *landscape.Landscape, objs []manifest, timeout time.Duration) error {
	var watches []*providerWatch
	// A provider applied earlier that failed (its init installs the CRD
	// a later object needs, say) ends the wait for that object at once.
	failed := func(ctx context.Context) error {
		var errs []error
		for _, w := range watches {
			errs = append(errs, w.failed(ctx))
		}
		return errors.Join(errs...)
	}
	for _, m := range objs {
		if err := applyManifest(ctx, l.Platform.Client, timeout, m, failed); err != nil {
			return err
		}
		if isProviderKind(m.obj.GroupVersionKind()) {
			watches = append(watches, newProviderWatch(l, m.obj.GetKind(), m.obj.GetName()))
		}
	}
	var ready []string
	for _, w := range watches {
		if err := w.waitReady(ctx, timeout); err != nil {
			return err
		}
		ready = append(ready, w.String())
	}
	line := fmt.Sprintf("Your manifests: %d object(s) applied", len(objs))
	if len(ready) > 0 {
		line += "; Ready: " + strings.Join(ready, ", ")
	}
	l.AddSummary(line)
	return nil
}

// applyManifest applies one object. While its kind is not served, it waits
// for the kind's CRD to be Established (and then for the client's
// discovery to see it), naming the CRD and its conditions when the time is
// up; check may end the wait.
func applyManifest(ctx context.Context, c client.Client, timeout time.Duration, m manifest, check func(context.Context) error) error {
	obj := m.obj.DeepCopy()
	gvk := obj.GroupVersionKind()
	var (
		last    lastError
		crdSeen string
	)
	return waitFor(ctx, timeout, m.String()+" applied", func(ctx context.Context) (bool, error) {
		if err := check(ctx); err != nil {
			return false, err
		}
		namespaced, err := c.IsObjectNamespaced(obj)
		if apimeta.IsNoMatchError(err) {
			crdSeen = kindCRDState(ctx, c, gvk.Group, gvk.Kind)
			return last.note(err)
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", m, err)
		}
		if namespaced && obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault) // as kubectl apply does
		}
		err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(ManifestFieldOwner), client.ForceOwnership)
		switch {
		case err == nil:
			return true, nil
		case apimeta.IsNoMatchError(err):
			crdSeen = kindCRDState(ctx, c, gvk.Group, gvk.Kind)
			return last.note(err)
		case crdinstall.Transient(err):
			// An overloaded API server; the apply is idempotent, so it is
			// sent again at the next poll.
			return last.note(err)
		}
		return false, fmt.Errorf("apply %s: %w", m, err)
	}, func() string { return joinSeen(crdSeen, last.String()) })
}

// kindCRDState describes the CRD that serves kind in group: missing, or its
// name and conditions.
func kindCRDState(ctx context.Context, c client.Client, group, kind string) string {
	list := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, list); err != nil {
		return "listing CRDs: " + err.Error()
	}
	for i := range list.Items {
		crd := &list.Items[i]
		if crd.Spec.Group == group && crd.Spec.Names.Kind == kind {
			state := "not Established"
			if crdinstall.Established(crd) {
				state = "Established"
			}
			return fmt.Sprintf("CRD %s is %s (%s)", crd.Name, state, crdConditions(crd))
		}
	}
	return fmt.Sprintf("no CRD serves kind %s of group %s (a provider's init installs it, or apply the CRD in a manifest before it)", kind, group)
}
