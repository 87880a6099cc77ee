package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// objectStatus is the status every instance kind shares: Service Fabrik's
// state and Marketplane's phase and conditions.
type objectStatus struct {
	State        string             `json:"state,omitempty"`
	Phase        string             `json:"phase,omitempty"`
	Error        string             `json:"error,omitempty"`
	Description  string             `json:"description,omitempty"`
	DashboardURL string             `json:"dashboardUrl,omitempty"`
	Conditions   []metav1.Condition `json:"conditions,omitempty"`
}

func statusOf(u *unstructured.Unstructured) objectStatus {
	var st objectStatus
	if m, ok := u.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	}
	return st
}

// ready returns the Ready condition's status, reason and message.
func (st objectStatus) ready() (status, reason, message string) {
	for _, c := range st.Conditions {
		if c.Type == "Ready" {
			return string(c.Status), c.Reason, c.Message
		}
	}
	return "Unknown", "", ""
}

// instanceRow is one instance of the instances page.
type instanceRow struct {
	Name, Kind, Res, URL, Detail, State, Phase, Ready, Reason string
	// ReadyClass and Age are computed here rather than by template
	// functions: on a page of 1,000 rows the calls cost.
	ReadyClass, Age string
	Deleting        bool
}

// family is one kind listed on the instances page.
type family struct {
	Kind      string
	Offering  string
	Rows      []instanceRow
	Forbidden bool
	Error     string
}

type instancesData struct {
	Namespace string
	Families  []family
	Forbidden bool // every list was refused
	Count     int
	Error     string
}

func (s *Server) instancesPage(w http.ResponseWriter, r *http.Request, sess *session) {
	ns := strings.TrimSpace(r.URL.Query().Get("namespace"))
	if ns == "" {
		ns = sess.Namespace()
	}
	d := instancesData{Namespace: ns}
	if ns == "" {
		s.render(w, http.StatusOK, "instances", sess, "instances", "Instances", d)
		return
	}
	if len(validation.IsDNS1123Label(ns)) > 0 {
		d.Error = "A namespace name is lower-case letters, digits and dashes."
		s.render(w, http.StatusBadRequest, "instances", sess, "instances", "Instances", d)
		return
	}
	sess.setNamespace(ns)
	ctx, cancel := s.ctx(r)
	defer cancel()
	// The SFServiceInstances do not depend on the Offerings: both lists go
	// to the API server at once.
	sfDone := make(chan leanResult, 1)
	go func() {
		items, err := sess.kube.listLean(ctx, instancesGVR, ns)
		sfDone <- leanResult{items, err}
	}()
	offerings, err := sess.kube.listOfferings(ctx)
	if err != nil {
		cancel()
		<-sfDone
		s.showError(w, r, sess, describeError("list the offerings", err))
		return
	}
	d.Families = s.listInstances(ctx, sess.kube, ns, offerings, <-sfDone)
	d.Forbidden = true
	for _, f := range d.Families {
		d.Count += len(f.Rows)
		if !f.Forbidden {
			d.Forbidden = false
		}
	}
	status := http.StatusOK
	if d.Forbidden {
		status = http.StatusForbidden
	}
	s.render(w, status, "instances", sess, "instances", "Instances in "+ns, d)
}

// leanResult is the outcome of a listLean.
type leanResult struct {
	items []leanObject
	err   error
}

// listInstances builds the families of the instances page: the
// SFServiceInstances of ns (sf, listed by the caller) and the objects of
// every namespaced kind the offerings name, listed concurrently.
func (s *Server) listInstances(ctx context.Context, k *kube, ns string, offerings []marketplacev1alpha1.Offering, sfList leanResult) []family {
	services := map[string]string{}
	plans := map[string]string{}
	seen := map[schema.GroupVersionResource]bool{}
	var kinds []struct {
		kind     marketplacev1alpha1.OfferedKind
		offering string
	}
	for i := range offerings {
		o := &offerings[i]
		if o.Spec.ServiceID != "" {
			services[o.Spec.ServiceID] = title(o)
		}
		for _, p := range o.Spec.Plans {
			plans[p.ID] = p.Name
		}
		for _, kd := range o.Spec.Kinds {
			gvr := providerGVR(kd)
			if kd.Plural == "" || kd.Scope == "Cluster" || seen[gvr] {
				continue
			}
			seen[gvr] = true
			kinds = append(kinds, struct {
				kind     marketplacev1alpha1.OfferedKind
				offering string
			}{kd, title(o)})
		}
	}
	var out []family
	sf := family{Kind: "SFServiceInstance", Offering: "Service Fabrik services"}
	sf.Forbidden, sf.Error = listError(sfList.err)
	for i := range sfList.items {
		o := &sfList.items[i]
		row := rowOf(o, "SFServiceInstance", sfResource)
		row.Detail = orDefault(services[o.Spec.ServiceID], o.Spec.ServiceID) + " / " + orDefault(plans[o.Spec.PlanID], o.Spec.PlanID)
		sf.Rows = append(sf.Rows, row)
	}
	out = append(out, sf)
	results := make([]leanResult, len(kinds))
	var wg sync.WaitGroup
	for i, kd := range kinds {
		wg.Go(func() {
			items, err := k.listLean(ctx, providerGVR(kd.kind), ns)
			results[i] = leanResult{items, err}
		})
	}
	wg.Wait()
	for i, kd := range kinds {
		f := family{Kind: kd.kind.Kind, Offering: kd.offering}
		f.Forbidden, f.Error = listError(results[i].err)
		for j := range results[i].items {
			row := rowOf(&results[i].items[j], kd.kind.Kind, kindResource(kd.kind))
			row.Detail = kd.offering
			f.Rows = append(f.Rows, row)
		}
		out = append(out, f)
	}
	for i := range out {
		sort.Slice(out[i].Rows, func(a, b int) bool { return out[i].Rows[a].Name < out[i].Rows[b].Name })
	}
	return out
}

func listError(err error) (forbidden bool, msg string) {
	switch {
	case err == nil:
		return false, ""
	case apierrors.IsForbidden(err):
		return true, "not permitted"
	default:
		return false, describeError("list", err).Message
	}
}

func rowOf(o *leanObject, kind, res string) instanceRow {
	ready, reason, _ := o.Status.ready()
	return instanceRow{
		Name: o.Metadata.Name, Kind: kind, Res: res, URL: instanceURL(o.Metadata.Namespace, res, o.Metadata.Name),
		State: o.Status.State, Phase: o.Status.Phase, Ready: ready, ReadyClass: strings.ToLower(ready), Reason: reason,
		Age: ago(o.Metadata.CreationTimestamp.Time), Deleting: o.Metadata.DeletionTimestamp != nil,
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// resourceOf parses the resource segment of an instance URL.
func resourceOf(res string) (schema.GroupVersionResource, bool) {
	if res == sfResource {
		return instancesGVR, true
	}
	parts := strings.SplitN(res, ".", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return schema.GroupVersionResource{}, false
	}
	return schema.GroupVersionResource{Resource: parts[0], Version: parts[1], Group: parts[2]}, true
}

// eventRow is one event of an instance.
type eventRow struct {
	Type, Reason, Message string
	Count                 int32
	Last                  time.Time
}

// bindingRow is one SFServiceBinding of an instance.
type bindingRow struct {
	Name, State, Phase, Ready, Reason string
	HasCredentials                    bool
	Deleting                          bool
}

// instanceView is the instance page and its live part.
type instanceView struct {
	Namespace, Name, Res, Kind, APIVersion string
	URL                                    string
	IsSF                                   bool
	Bindable                               bool
	Status                                 objectStatus
	Ready, Reason, Message                 string
	Spec                                   string
	Deleting                               bool
	Gone                                   bool
	Events                                 []eventRow
	EventsError                            string
	Bindings                               []bindingRow
	ControlPlane                           *controlPlaneView
	BindingsError                          string
	CSRF                                   string
	BindingName                            string
	BindingError                           string
}

// loadInstance reads the instance, its events and (SF) its bindings.
func (s *Server) loadInstance(ctx context.Context, sess *session, ns, res, name string) (*instanceView, *unstructured.Unstructured, error) {
	gvr, ok := resourceOf(res)
	if !ok {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Resource: res}, name)
	}
	u, err := sess.kube.onboarding.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	v := &instanceView{
		Namespace: ns, Name: name, Res: res, Kind: u.GetKind(), APIVersion: u.GetAPIVersion(),
		URL: instanceURL(ns, res, name), IsSF: res == sfResource, Status: statusOf(u),
		Deleting: u.GetDeletionTimestamp() != nil, CSRF: sess.csrf,
	}
	v.Ready, v.Reason, v.Message = v.Status.ready()
	if spec, ok := u.Object["spec"]; ok {
		if b, err := json.MarshalIndent(spec, "", "  "); err == nil {
			v.Spec = string(b)
		}
	}
	evs, err := sess.kube.core.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.name", name),
		fields.OneTermEqualSelector("involvedObject.kind", u.GetKind()),
	).String()})
	if err != nil {
		v.EventsError = describeError("read the events", err).Message
	} else {
		for _, e := range evs.Items {
			last := e.LastTimestamp.Time
			if last.IsZero() {
				last = e.EventTime.Time
			}
			if last.IsZero() {
				last = e.CreationTimestamp.Time
			}
			v.Events = append(v.Events, eventRow{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, Last: last})
		}
		sort.Slice(v.Events, func(i, j int) bool { return v.Events[i].Last.After(v.Events[j].Last) })
	}
	if v.IsSF {
		s.loadBindings(ctx, sess, u, v)
	} else {
		v.ControlPlane = loadControlPlane(ctx, sess, ns, name)
	}
	return v, u, nil
}

// loadBindings lists the bindings of inst: those whose instance, as the
// inter-operator resolves it (SFServiceBindingSpec.InstanceNames, by name),
// is inst. The instance's own spec.instanceId plays no part: an instance
// "a" with spec.instanceId "b" must not show, nor bind, instance "b".
func (s *Server) loadBindings(ctx context.Context, sess *session, inst *unstructured.Unstructured, v *instanceView) {
	v.Bindable = true
	l, err := sess.kube.onboarding.Resource(bindingsGVR).Namespace(inst.GetNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		v.BindingsError = describeError("list the bindings", err).Message
		return
	}
	for i := range l.Items {
		var b osbv1alpha1.SFServiceBinding
		if err := fromUnstructured(&l.Items[i], &b); err != nil || !s.bindsInstance(ctx, sess, &b, inst.GetName()) {
			continue
		}
		st := statusOf(&l.Items[i])
		ready, reason, _ := st.ready()
		v.Bindings = append(v.Bindings, bindingRow{
			Name: b.Name, State: string(b.Status.State), Phase: b.Status.Phase, Ready: ready, Reason: reason,
			HasCredentials: b.Status.Response != nil && b.Status.Response.SecretRef != "",
			Deleting:       b.DeletionTimestamp != nil,
		})
	}
	sort.Slice(v.Bindings, func(i, j int) bool { return v.Bindings[i].Name < v.Bindings[j].Name })
}

// bindsInstance reports whether the instance of binding b is the instance
// called name of b's namespace: the first of b's instance names that exists
// (the inter-operator's lookup). Only when name is a later candidate are the
// earlier ones read.
func (s *Server) bindsInstance(ctx context.Context, sess *session, b *osbv1alpha1.SFServiceBinding, name string) bool {
	names := b.Spec.InstanceNames()
	i := slices.Index(names, name)
	if i < 0 {
		return false
	}
	// An earlier name wins when that instance exists.
	for _, n := range names[:i] {
		if _, err := sess.kube.onboarding.Resource(instancesGVR).Namespace(b.Namespace).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false
		}
	}
	return true
}

func (s *Server) instancePage(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, _, err := s.loadInstance(ctx, sess, r.PathValue("ns"), r.PathValue("res"), r.PathValue("name"))
	if err != nil {
		s.showError(w, r, sess, describeError("read "+r.PathValue("name")+" in namespace "+r.PathValue("ns"), err))
		return
	}
	s.render(w, http.StatusOK, "instance", sess, "instances", v.Name, v)
}

// instanceLive is the part of the instance page that the page's script
// fetches every two seconds: status, conditions, events, bindings. A
// deleted instance answers "gone" (200), so the page can say so.
func (s *Server) instanceLive(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, _, err := s.loadInstance(ctx, sess, r.PathValue("ns"), r.PathValue("res"), r.PathValue("name"))
	if apierrors.IsNotFound(err) {
		s.renderFragment(w, "live", &instanceView{Gone: true, Name: r.PathValue("name"), Namespace: r.PathValue("ns")})
		return
	}
	if err != nil {
		e := describeError("read "+r.PathValue("name"), err)
		w.WriteHeader(e.Status)
		s.renderFragment(w, "liveError", e)
		return
	}
	s.renderFragment(w, "live", v)
}

// createBinding creates an SFServiceBinding of an SF instance.
func (s *Server) createBinding(w http.ResponseWriter, r *http.Request, sess *session) {
	ns, res, name := r.PathValue("ns"), r.PathValue("res"), r.PathValue("name")
	ctx, cancel := s.ctx(r)
	defer cancel()
	if res != sfResource {
		s.showError(w, r, sess, apiError{http.StatusBadRequest, "Not bindable", "Only Service Fabrik instances have bindings."})
		return
	}
	v, u, err := s.loadInstance(ctx, sess, ns, res, name)
	if err != nil {
		s.showError(w, r, sess, describeError("read "+name+" in namespace "+ns, err))
		return
	}
	var inst osbv1alpha1.SFServiceInstance
	if err := fromUnstructured(u, &inst); err != nil {
		s.showError(w, r, sess, apiError{http.StatusBadGateway, "Unreadable instance", err.Error()})
		return
	}
	bname := strings.TrimSpace(r.PostForm.Get("binding"))
	v.BindingName = bname
	if errs := validation.IsDNS1123Label(bname); len(errs) > 0 {
		v.BindingError = strings.Join(errs, "; ")
		s.render(w, http.StatusUnprocessableEntity, "instance", sess, "instances", v.Name, v)
		return
	}
	// spec.instanceId of a binding names its instance (the inter-operator
	// looks the instance up by that name), so it is the instance's name,
	// whatever the instance's own spec.instanceId says.
	b := &osbv1alpha1.SFServiceBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: osbv1alpha1.GroupVersion.String(), Kind: "SFServiceBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: bname, Namespace: ns},
		Spec:       osbv1alpha1.SFServiceBindingSpec{ID: bname, InstanceID: inst.Name, PlanID: inst.Spec.PlanID, ServiceID: inst.Spec.ServiceID},
	}
	bu, err := toUnstructured(b)
	if err == nil {
		_, err = sess.kube.onboarding.Resource(bindingsGVR).Namespace(ns).Create(ctx, bu, metav1.CreateOptions{})
	}
	if err != nil {
		v.BindingError = describeError("create the binding "+bname, err).Message
		s.render(w, http.StatusUnprocessableEntity, "instance", sess, "instances", v.Name, v)
		return
	}
	s.log.Info("binding created", "user", sess.user, "namespace", ns, "binding", bname, "instance", name)
	http.Redirect(w, r, instanceURL(ns, res, name), http.StatusSeeOther)
}

// bindingCredentials answers, to a POST from the instance page's script
// (CSRF header), the bind response of a binding from its Secret, as JSON.
// Credentials never appear in a URL, a page's HTML or a log; the answer is
// not cached.
func (s *Server) bindingCredentials(w http.ResponseWriter, r *http.Request, sess *session) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	ctx, cancel := s.ctx(r)
	defer cancel()
	writeErr := func(e apiError) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.Status)
		if err := json.NewEncoder(w).Encode(map[string]string{"error": e.Message}); err != nil {
			s.log.V(1).Info("write an error answer", "error", err.Error())
		}
	}
	u, err := sess.kube.onboarding.Resource(bindingsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		writeErr(describeError("read the binding "+name, err))
		return
	}
	var b osbv1alpha1.SFServiceBinding
	if err := fromUnstructured(u, &b); err != nil {
		writeErr(apiError{Status: http.StatusBadGateway, Message: err.Error()})
		return
	}
	if b.Status.Response == nil || b.Status.Response.SecretRef == "" {
		writeErr(apiError{Status: http.StatusConflict, Message: "The binding has no credentials yet."})
		return
	}
	sec, err := sess.kube.core.CoreV1().Secrets(ns).Get(ctx, b.Status.Response.SecretRef, metav1.GetOptions{})
	if err != nil {
		writeErr(describeError("read the binding's credentials", err))
		return
	}
	raw := sec.Data["response"]
	var resp any
	if err := json.Unmarshal(raw, &resp); err != nil {
		writeErr(apiError{Status: http.StatusBadGateway, Message: "The binding's response is not JSON."})
		return
	}
	out, err := json.MarshalIndent(resp, "", "  ")
	if err != nil {
		writeErr(apiError{Status: http.StatusBadGateway, Message: fmt.Sprintf("encode: %v", err)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// instancesURL is the instances page of ns.
func instancesURL(ns string) string { return "/instances?namespace=" + url.QueryEscape(ns) }
