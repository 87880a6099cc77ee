package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// listOfferings returns every Offering, sorted by display name.
func (k *kube) listOfferings(ctx context.Context) ([]marketplacev1alpha1.Offering, error) {
	l, err := k.onboarding.Resource(offeringsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]marketplacev1alpha1.Offering, 0, len(l.Items))
	for i := range l.Items {
		var o marketplacev1alpha1.Offering
		if err := fromUnstructured(&l.Items[i], &o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return title(&out[i]) < title(&out[j]) })
	return out, nil
}

func (k *kube) getOffering(ctx context.Context, name string) (*marketplacev1alpha1.Offering, error) {
	u, err := k.onboarding.Resource(offeringsGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var o marketplacev1alpha1.Offering
	if err := fromUnstructured(u, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// title is an offering's display name, or its name.
func title(o *marketplacev1alpha1.Offering) string {
	if o.Spec.DisplayName != "" {
		return o.Spec.DisplayName
	}
	return o.Name
}

// offeringRow is one line of the offerings page.
type offeringRow struct {
	Name, Title, Description, Type, Version string
	Ready                                   bool
	Items                                   []string // kinds or plans
}

type offeringsData struct {
	Query string
	Rows  []offeringRow
	Total int
}

// matches reports whether o matches every word of q (case-insensitive) in
// its name, display name, description, tags, kinds or plans.
func matches(o *marketplacev1alpha1.Offering, q string) bool {
	hay := []string{o.Name, o.Spec.DisplayName, o.Spec.Description, string(o.Spec.Source.Kind)}
	hay = append(hay, o.Spec.Tags...)
	for _, k := range o.Spec.Kinds {
		hay = append(hay, k.Kind, k.Group)
	}
	for _, p := range o.Spec.Plans {
		hay = append(hay, p.Name, p.Description)
	}
	text := strings.ToLower(strings.Join(hay, " "))
	for _, w := range strings.Fields(strings.ToLower(q)) {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

func (s *Server) offeringsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	list, err := sess.kube.listOfferings(ctx)
	if err != nil {
		s.showError(w, r, sess, describeError("list the offerings", err))
		return
	}
	q := r.URL.Query().Get("q")
	d := offeringsData{Query: q, Total: len(list)}
	for i := range list {
		o := &list[i]
		if !matches(o, q) {
			continue
		}
		row := offeringRow{Name: o.Name, Title: title(o), Description: o.Spec.Description, Type: string(o.Spec.Source.Kind), Version: o.Spec.Version, Ready: o.Spec.Ready}
		for _, k := range o.Spec.Kinds {
			row.Items = append(row.Items, k.Kind)
		}
		for _, p := range o.Spec.Plans {
			row.Items = append(row.Items, p.Name)
		}
		d.Rows = append(d.Rows, row)
	}
	s.render(w, http.StatusOK, "offerings", sess, "offerings", "Offerings", d)
}

// choice is one plan or kind of an offering, for the selector.
type choice struct {
	ID, Label, Description string
	Selected               bool
}

type offeringData struct {
	Offering  *marketplacev1alpha1.Offering
	Title     string
	IsSF      bool
	Choices   []choice
	Choice    string // selected plan id or kind
	Form      *form
	Namespace string
	Name      string
	NameError string
	Errors    []string
	Schema    string // the schema, pretty, for reference
	Bindable  bool
	// ControlPlane is the ManagedControlPlane picked for a code-based
	// order (empty: a new one); ControlPlanes are those to pick from.
	ControlPlane       string
	ControlPlanes      []controlPlaneChoice
	ControlPlanesError string
}

// selection is what an offering page orders: an SF plan or a provider kind.
type selection struct {
	plan *marketplacev1alpha1.Plan
	kind *marketplacev1alpha1.OfferedKind
}

// choose returns the offering's choices and the selected one (id from the
// query or form; default the first).
func choose(o *marketplacev1alpha1.Offering, id string) ([]choice, selection, []byte) {
	var cs []choice
	var sel selection
	var schema []byte
	if o.Spec.Source.Kind == marketplacev1alpha1.SourceSFService {
		for i := range o.Spec.Plans {
			p := &o.Spec.Plans[i]
			if sel.plan == nil && (id == "" || id == p.ID) {
				sel.plan = p
			}
			cs = append(cs, choice{ID: p.ID, Label: p.Name, Description: p.Description, Selected: sel.plan == p})
		}
		if sel.plan != nil && sel.plan.Schemas != nil && sel.plan.Schemas.InstanceCreate != nil {
			schema = sel.plan.Schemas.InstanceCreate.Raw
		}
		return cs, sel, schema
	}
	for i := range o.Spec.Kinds {
		k := &o.Spec.Kinds[i]
		if k.Plural == "" || k.Scope == "Cluster" {
			continue // not orderable here: CRD missing or not namespaced
		}
		if sel.kind == nil && (id == "" || id == k.Kind) {
			sel.kind = k
		}
		cs = append(cs, choice{ID: k.Kind, Label: k.Kind, Description: k.Group + "/" + k.Version, Selected: sel.kind == k})
	}
	if sel.kind != nil && sel.kind.Schema != nil {
		schema = sel.kind.Schema.Raw
	}
	return cs, sel, schema
}

// offeringPageData loads the offering and builds its page's data.
func (s *Server) offeringPageData(ctx context.Context, sess *session, name, choiceID string) (*offeringData, selection, error) {
	o, err := sess.kube.getOffering(ctx, name)
	if err != nil {
		return nil, selection{}, err
	}
	cs, sel, raw := choose(o, choiceID)
	d := &offeringData{Offering: o, Title: title(o), IsSF: o.Spec.Source.Kind == marketplacev1alpha1.SourceSFService, Choices: cs, Namespace: sess.Namespace()}
	if sel.plan != nil {
		d.Choice = sel.plan.ID
	} else if sel.kind != nil {
		d.Choice = sel.kind.Kind
	}
	f, err := newForm(raw)
	if err != nil {
		f = &form{Errors: []string{"The offering's schema cannot be read: " + err.Error()}}
	}
	d.Form = f
	if len(raw) > 0 {
		var pretty any
		if json.Unmarshal(raw, &pretty) == nil {
			if b, err := json.MarshalIndent(pretty, "", "  "); err == nil {
				d.Schema = string(b)
			}
		}
	}
	return d, sel, nil
}

func (s *Server) offeringPage(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	d, sel, err := s.offeringPageData(ctx, sess, r.PathValue("name"), r.URL.Query().Get("choice"))
	if err != nil {
		s.showError(w, r, sess, describeError("read the offering", err))
		return
	}
	if sel.kind != nil && d.Namespace != "" {
		d.ControlPlanes, d.ControlPlanesError = listControlPlanes(ctx, sess, d.Namespace, sel.kind, "")
	}
	s.render(w, http.StatusOK, "offering", sess, "offerings", d.Title, d)
}

// createInstance checks the form against the schema and creates the
// instance with the user's token: an SFServiceInstance for an SF
// offering; for a code-based one the provider's kind at its
// ManagedControlPlane, which is created first unless the form picks one.
func (s *Server) createInstance(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	d, sel, err := s.offeringPageData(ctx, sess, r.PathValue("name"), r.PostForm.Get("choice"))
	if err != nil {
		s.showError(w, r, sess, describeError("read the offering", err))
		return
	}
	d.Namespace = strings.TrimSpace(r.PostForm.Get("namespace"))
	d.Name = strings.TrimSpace(r.PostForm.Get("name"))
	d.ControlPlane = strings.TrimSpace(r.PostForm.Get(ControlPlaneField))
	values, ok := checkOrder(d, sel, r.PostForm)
	if !ok {
		if sel.kind != nil && len(validation.IsDNS1123Label(d.Namespace)) == 0 {
			d.ControlPlanes, d.ControlPlanesError = listControlPlanes(ctx, sess, d.Namespace, sel.kind, d.ControlPlane)
		}
		s.render(w, http.StatusUnprocessableEntity, "offering", sess, "offerings", d.Title, d)
		return
	}
	sess.setNamespace(d.Namespace)
	var res string
	if sel.plan != nil {
		res, err = s.createSFInstance(ctx, sess, d, sel.plan, values)
	} else {
		res, err = s.createProviderObject(ctx, sess, d, sel.kind, values)
	}
	if err != nil {
		e := describeError("create "+d.Name+" in namespace "+d.Namespace, err)
		d.Errors = append(d.Errors, e.Message)
		if sel.kind != nil {
			d.ControlPlanes, d.ControlPlanesError = listControlPlanes(ctx, sess, d.Namespace, sel.kind, d.ControlPlane)
		}
		s.render(w, e.Status, "offering", sess, "offerings", d.Title, d)
		return
	}
	s.log.Info("instance created", "user", sess.user, "namespace", d.Namespace, "name", d.Name, "offering", d.Offering.Name)
	http.Redirect(w, r, instanceURL(d.Namespace, res, d.Name), http.StatusSeeOther)
}

// checkOrder checks the order form in d (name, namespace, control plane,
// the schema's fields) and returns the spec's values, writing the errors
// into d.
func checkOrder(d *offeringData, sel selection, form url.Values) (map[string]any, bool) {
	ok := true
	if sel.kind != nil && d.ControlPlane != "" {
		// The object takes the name of the control plane it serves.
		switch {
		case len(validation.IsDNS1123Label(d.ControlPlane)) > 0:
			d.Errors, ok = append(d.Errors, "Control plane: not a ManagedControlPlane name."), false
		case d.Name == "":
			d.Name = d.ControlPlane
		case d.Name != d.ControlPlane:
			d.NameError, ok = "An instance takes the name of its ManagedControlPlane: leave the name empty or use "+d.ControlPlane+".", false
		}
	}
	if errs := validation.IsDNS1123Label(d.Name); ok && len(errs) > 0 {
		d.NameError, ok = strings.Join(errs, "; "), false
	}
	if len(validation.IsDNS1123Label(d.Namespace)) > 0 {
		d.Errors, ok = append(d.Errors, "Namespace: a namespace name is lower-case letters, digits and dashes."), false
	}
	values := d.Form.fill(form)
	if !d.Form.validate(values) {
		ok = false
	}
	if sel.plan == nil && sel.kind == nil {
		d.Errors, ok = append(d.Errors, "This offering has no plan or kind that can be ordered."), false
	}
	return values, ok
}

// createSFInstance creates the SFServiceInstance of an order of plan.
func (s *Server) createSFInstance(ctx context.Context, sess *session, d *offeringData, plan *marketplacev1alpha1.Plan, values map[string]any) (string, error) {
	params, perr := json.Marshal(values)
	ctxRaw, cerr := json.Marshal(map[string]string{"platform": "kubernetes", "namespace": d.Namespace})
	if err := errors.Join(perr, cerr); err != nil {
		return "", fmt.Errorf("encode the parameters: %w", err)
	}
	inst := &osbv1alpha1.SFServiceInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: osbv1alpha1.GroupVersion.String(), Kind: "SFServiceInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace},
		Spec: osbv1alpha1.SFServiceInstanceSpec{
			InstanceID: d.Name, ServiceID: d.Offering.Spec.ServiceID, PlanID: plan.ID,
			Parameters: &runtime.RawExtension{Raw: params},
			Context:    &runtime.RawExtension{Raw: ctxRaw},
		},
	}
	u, err := toUnstructured(inst)
	if err == nil {
		_, err = sess.kube.onboarding.Resource(instancesGVR).Namespace(d.Namespace).Create(ctx, u, metav1.CreateOptions{})
	}
	return sfResource, err
}

// createProviderObject creates the provider's object of an order of kind
// at its ManagedControlPlane: a new one named like the instance, unless
// the form picked one (d.ControlPlane). A new control plane is removed
// again when the object cannot be created, so the order can be re-sent.
func (s *Server) createProviderObject(ctx context.Context, sess *session, d *offeringData, kind *marketplacev1alpha1.OfferedKind, values map[string]any) (string, error) {
	if d.ControlPlane == "" {
		if err := createControlPlane(ctx, sess, d.Namespace, d.Name, kind.Kind); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return "", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonAlreadyExists,
					Message: "A ManagedControlPlane named " + d.Name + " exists in " + d.Namespace + ": pick it under Control plane to place the " + kind.Kind + " there."}}
			}
			return "", err
		}
	} else if _, err := sess.kube.onboarding.Resource(managedControlPlanesGVR).Namespace(d.Namespace).Get(ctx, d.ControlPlane, metav1.GetOptions{}); err != nil {
		return "", fmt.Errorf("read ManagedControlPlane %s/%s: %w", d.Namespace, d.ControlPlane, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kind.Group + "/" + kind.Version,
		"kind":       kind.Kind,
		"metadata":   map[string]any{"name": d.Name, "namespace": d.Namespace},
		"spec":       values,
	}}
	_, err := sess.kube.onboarding.Resource(providerGVR(*kind)).Namespace(d.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil && d.ControlPlane == "" {
		if derr := deleteControlPlane(ctx, sess, d.Namespace, d.Name); derr != nil {
			s.log.Error(derr, "remove the control plane of a failed order", "namespace", d.Namespace, "name", d.Name)
		}
	}
	return kindResource(*kind), err
}

// sfResource is the path segment of SFServiceInstances; a provider kind's
// is "<plural>.<version>.<group>" (kindResource).
const sfResource = "sf"

func kindResource(k marketplacev1alpha1.OfferedKind) string {
	return k.Plural + "." + k.Version + "." + k.Group
}

func instanceURL(ns, res, name string) string {
	return "/ns/" + url.PathEscape(ns) + "/" + url.PathEscape(res) + "/" + url.PathEscape(name)
}
