package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// CRDWait bounds how long applying a CustomResourceDefinition waits for it
// to be Established and its kind served, before the objects after it,
// which may be of that kind, are applied.
const CRDWait = 60 * time.Second

// crdGroupKind is the GroupKind of CustomResourceDefinitions.
var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// IsCRD reports whether o is a CustomResourceDefinition, of any version.
func IsCRD(o *unstructured.Unstructured) bool {
	return o.GroupVersionKind().GroupKind() == crdGroupKind
}

// ChartCRD is a CustomResourceDefinition of a Helm chart's crds/
// directory, which is installed as Helm installs it (MissingCRDs,
// InstallCRDs) rather than applied.
type ChartCRD struct {
	// File is the file's path in the chart.
	File string
	// Object is the CRD as the file holds it.
	Object *unstructured.Unstructured
}

// UnservedCRDError is a CRD of a Helm chart's crds/ directory that the
// cluster lacks and cannot install: it does not serve the CRD's own
// apiVersion (apiextensions.k8s.io/v1beta1 is gone since Kubernetes 1.22).
type UnservedCRDError struct {
	// File is the chart file that holds the CRD.
	File string
	// Ref is the CRD.
	Ref osbv1alpha1.Source
	// Defines is the group and kind the CRD defines.
	Defines schema.GroupKind
	// Err is the RESTMapper's answer.
	Err error
}

// Error implements error.
func (e *UnservedCRDError) Error() string {
	return fmt.Sprintf("the chart's %s holds %s %s %s, an apiVersion the cluster does not serve, and nothing serves the kind it defines (%s) yet: ship the CRD as apiextensions.k8s.io/v1, or install it on the cluster first",
		e.File, e.Ref.APIVersion, e.Ref.Kind, e.Ref.Name, kindName(e.Defines))
}

// Unwrap returns the RESTMapper's answer.
func (e *UnservedCRDError) Unwrap() error { return e.Err }

// MissingCRDs returns, of crds, the CRDs a Helm chart's crds/ directory
// holds, those the cluster lacks, ready to be created, in order. As Helm,
// it leaves a CRD that is present alone: one of the same name, or one
// that serves the group and kind the CRD defines (so that a chart shipping
// an apiextensions.k8s.io/v1beta1 CRD works on a cluster that has it in
// v1 form). A missing CRD whose apiVersion the cluster does not serve is
// an *UnservedCRDError; a file that holds anything but a CRD an
// *InvalidObjectError. It only reads, and waits (up to CRDWait) for a CRD
// of the name that is not Established yet: another operation may have
// just created it.
func (a *Applier) MissingCRDs(ctx context.Context, crds []ChartCRD) ([]*unstructured.Unstructured, error) {
	var missing []*unstructured.Unstructured
	for i, c := range crds {
		o := c.Object
		r := ref(o)
		if !IsCRD(o) || o.GetName() == "" {
			return nil, &InvalidObjectError{Index: i + 1, What: fmt.Sprintf("the chart's %s: %s", c.File, describeObject(o)),
				Problem: "a chart's crds/ directory holds named CustomResourceDefinitions only"}
		}
		present, err := a.crdPresent(ctx, o)
		if err != nil {
			return nil, err
		}
		if present {
			continue
		}
		gv, err := schema.ParseGroupVersion(o.GetAPIVersion())
		if err != nil {
			return nil, &InvalidObjectError{Index: i + 1, What: "the chart's " + c.File, Problem: err.Error()}
		}
		if _, err := a.mapper.RESTMapping(crdGroupKind, gv.Version); err != nil {
			if isNoMatch(err) {
				return nil, &UnservedCRDError{File: c.File, Ref: r, Defines: defines(o), Err: err}
			}
			return nil, fmt.Errorf("look up %s: %w", o.GetAPIVersion(), err)
		}
		obj := o.DeepCopy()
		obj.SetNamespace("")
		missing = append(missing, obj)
	}
	return missing, nil
}

// defines returns the group and kind the CRD o defines.
func defines(o *unstructured.Unstructured) schema.GroupKind {
	group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}
}

// crdPresent reports whether the cluster has the CRD o: one of its name,
// or one serving the group and kind it defines. A cluster identity that
// may not read CRDs is answered by the kinds it serves.
func (a *Applier) crdPresent(ctx context.Context, o *unstructured.Unstructured) (bool, error) {
	existing, err := a.getCRD(ctx, o.GetName())
	switch {
	case err == nil && existing != nil:
		if condition(existing, "Established")["status"] != "True" {
			return true, a.waitServed(ctx, existing)
		}
		return true, nil
	case err != nil && !apierrors.IsForbidden(err):
		return false, fmt.Errorf("get CustomResourceDefinition %s: %w", o.GetName(), err)
	}
	gk := defines(o)
	if gk.Group == "" || gk.Kind == "" {
		return false, nil
	}
	_, err = a.mapper.RESTMappings(gk)
	switch {
	case err == nil:
		return true, nil
	case isNoMatch(err):
		return false, nil
	}
	return false, fmt.Errorf("look up %s: %w", kindName(gk), err)
}

// getCRD reads the CRD name as apiextensions.k8s.io/v1; nil when missing.
func (a *Applier) getCRD(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(crdGroupKind.WithVersion("v1"))
	err := a.client.Get(ctx, client.ObjectKey{Name: name}, u)
	switch {
	case err == nil:
		return u, nil
	case apierrors.IsNotFound(err) || isNoMatch(err):
		return nil, nil
	}
	return nil, err
}

// InstallCRDs creates crds (from MissingCRDs) as fieldOwner, leaving one
// that appeared meanwhile alone (Helm's "already present"), and waits for
// each to be served (up to CRDWait), the one that appeared too. It never
// updates a CRD.
func (a *Applier) InstallCRDs(ctx context.Context, crds []*unstructured.Unstructured, fieldOwner string) error {
	if fieldOwner == "" {
		fieldOwner = DefaultFieldOwner
	}
	for _, o := range crds {
		obj := o.DeepCopy()
		obj.SetResourceVersion("")
		if err := a.client.Create(ctx, obj, client.FieldOwner(fieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
			return wrap(ref(o), "create", err)
		}
		if err := a.waitServed(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// waitServed waits, up to CRDWait, until the CRD o is Established and the
// cluster's RESTMapper maps its kind in each version it serves: the
// objects after it may be of that kind. The mapper refreshes the group on
// a miss, so a mapping found is current. A CRD whose names the API server
// did not accept is a *RejectedError; one not served in time an error.
func (a *Applier) waitServed(ctx context.Context, o *unstructured.Unstructured) error {
	r := ref(o)
	gk := defines(o)
	versions := servedVersions(o)
	ctx, cancel := context.WithTimeout(ctx, CRDWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	state := "not Established"
	for {
		crd, err := a.getCRD(ctx, o.GetName())
		switch {
		case apierrors.IsForbidden(err):
			// The identity may not read CRDs: the mapper alone tells.
			crd, err = o, nil
			state = "not served"
		case err != nil:
			state = err.Error()
		case crd == nil:
			state = "gone"
		}
		if crd != nil {
			if c := condition(crd, "NamesAccepted"); c != nil && c["status"] == "False" {
				return &RejectedError{Ref: r, Err: fmt.Errorf("its names are not accepted: %v", c["message"])}
			}
			if crd == o || condition(crd, "Established")["status"] == "True" {
				state = "Established, but its kind is not served yet"
				if a.mapped(gk, versions) {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CustomResourceDefinition %s is %s after %s: %w", o.GetName(), state, CRDWait, ctx.Err())
		case <-tick.C:
		}
	}
}

// mapped reports whether the RESTMapper maps gk in every version.
func (a *Applier) mapped(gk schema.GroupKind, versions []string) bool {
	if gk.Kind == "" {
		return true
	}
	for _, v := range versions {
		if _, err := a.mapper.RESTMapping(gk, v); err != nil {
			return false
		}
	}
	return true
}

// condition returns the status condition typ of o, or nil.
func condition(o *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// servedVersions returns the versions the CRD o serves: spec.versions
// whose served is not false, else v1beta1's spec.version.
func servedVersions(o *unstructured.Unstructured) []string {
	var out []string
	versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		if served, ok := m["served"].(bool); name == "" || (ok && !served) {
			continue
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		if v, _, _ := unstructured.NestedString(o.Object, "spec", "version"); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// crdScopes returns the kinds crds define, with the versions they serve
// and whether they are namespaced: what Prepare needs for objects of a
// kind that a CRD applied before them will define.
func crdScopes(crds []*unstructured.Unstructured) map[schema.GroupVersionKind]bool {
	out := map[schema.GroupVersionKind]bool{}
	for _, o := range crds {
		if !IsCRD(o) {
			continue
		}
		gk := defines(o)
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		for _, v := range servedVersions(o) {
			out[gk.WithVersion(v)] = scope != "Cluster"
		}
	}
	return out
}

// isNoMatch reports whether err says that a kind is not served. A
// discovery error counts only when every part of it is such a "no match":
// a failed discovery of a group must not pass for an absent kind.
func isNoMatch(err error) bool {
	var discovery *apiutil.ErrResourceDiscoveryFailed
	if errors.As(err, &discovery) {
		for _, e := range discovery.Unwrap() {
			if !apimeta.IsNoMatchError(e) {
				return false
			}
		}
		return true
	}
	return apimeta.IsNoMatchError(err)
}

// resourceNotFound reports whether err is the API server's 404 for a
// resource it does not serve, rather than for a missing namespace or
// object: a kind whose CRD went away after the RESTMapper cached it.
func resourceNotFound(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || (d.Name == "" && d.Kind == "")
}

// describeObject names o by apiVersion, kind and name.
func describeObject(o *unstructured.Unstructured) string {
	what := fmt.Sprintf("%s %s", o.GetAPIVersion(), o.GetKind())
	if o.GetName() != "" {
		what += " " + o.GetName()
	}
	return what
}
