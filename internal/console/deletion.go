package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// ConfirmField is the form field that a delete must carry, holding the
// name of what it deletes. Only the confirmation page sets it, so a delete
// always passes that page; a POST without it is sent there.
const ConfirmField = "confirm"

// confirmData is the confirmation page of a delete: what goes, what that
// removes, where the delete posts and where Cancel leads.
type confirmData struct {
	What      string // "instance" or "binding"
	Kind      string
	Namespace string
	Name      string
	Removes   []string
	Action    string
	Cancel    string
	CSRF      string
}

// confirmDeleteInstance shows "Delete X?" with what the delete removes and
// a POST button; without JavaScript it is a page of its own.
func (s *Server) confirmDeleteInstance(w http.ResponseWriter, r *http.Request, sess *session) {
	ns, res, name := r.PathValue("ns"), r.PathValue("res"), r.PathValue("name")
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, _, err := s.loadInstance(ctx, sess, ns, res, name)
	if err != nil {
		s.showError(w, r, sess, describeError("read "+name+" in namespace "+ns, err))
		return
	}
	d := confirmData{
		What: "instance", Kind: v.Kind, Namespace: ns, Name: name,
		Action: v.URL + "/delete", Cancel: v.URL, CSRF: sess.csrf,
	}
	d.Removes = instanceRemoves(v)
	s.render(w, http.StatusOK, "confirm", sess, "instances", "Delete "+name+"?", d)
}

// instanceRemoves says what deleting the instance of v removes.
func instanceRemoves(v *instanceView) []string {
	if v.IsSF {
		out := []string{"the service instance and everything the inter-operator provisioned for it"}
		if n := len(v.Bindings); n > 0 {
			out = append(out, fmt.Sprintf("its %d binding(s) stop working: applications using their credentials lose access", n))
		}
		return out
	}
	out := []string{fmt.Sprintf("the %s and what its provider made for it in the ManagedControlPlane", v.Kind)}
	if v.ControlPlane != nil {
		out = append(out, "the ManagedControlPlane "+v.Name+" stays; delete it yourself once the "+v.Kind+" is gone if nothing else uses it")
	}
	return out
}

// deleteInstance deletes an instance once confirmed (ConfirmField names
// it); an unconfirmed delete is sent to the confirmation page.
func (s *Server) deleteInstance(w http.ResponseWriter, r *http.Request, sess *session) {
	ns, res, name := r.PathValue("ns"), r.PathValue("res"), r.PathValue("name")
	gvr, ok := resourceOf(res)
	if !ok {
		s.showError(w, r, sess, apiError{http.StatusNotFound, "Not found", "No such kind of instance."})
		return
	}
	if r.PostForm.Get(ConfirmField) != name {
		http.Redirect(w, r, instanceURL(ns, res, name)+"/delete", http.StatusSeeOther)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	if err := sess.kube.onboarding.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		s.showError(w, r, sess, describeError("delete "+name+" in namespace "+ns, err))
		return
	}
	s.log.Info("instance deleted", "user", sess.user, "namespace", ns, "name", name, "resource", gvr.Resource)
	http.Redirect(w, r, instancesURL(ns), http.StatusSeeOther)
}

// bindingInstanceURL is the page of the instance a binding belongs to
// (the first of its instance names that exists, as the inter-operator
// resolves it), or the instances page when none does.
func (s *Server) bindingInstanceURL(ctx context.Context, sess *session, ns string, names []string) string {
	for _, n := range names {
		if _, err := sess.kube.onboarding.Resource(instancesGVR).Namespace(ns).Get(ctx, n, metav1.GetOptions{}); err == nil {
			return instanceURL(ns, sfResource, n)
		}
	}
	return instancesURL(ns)
}

// confirmDeleteBinding shows "Delete binding X?" with a POST button.
func (s *Server) confirmDeleteBinding(w http.ResponseWriter, r *http.Request, sess *session) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	ctx, cancel := s.ctx(r)
	defer cancel()
	b, err := s.getBinding(ctx, sess, ns, name)
	if err != nil {
		s.showError(w, r, sess, describeError("read the binding "+name+" in namespace "+ns, err))
		return
	}
	d := confirmData{
		What: "binding", Kind: "SFServiceBinding", Namespace: ns, Name: name,
		Action: bindingURL(ns, name) + "/delete", CSRF: sess.csrf,
		Cancel: s.bindingInstanceURL(ctx, sess, ns, b.Spec.InstanceNames()),
		Removes: []string{
			"the binding's credentials: the inter-operator unbinds them, and applications using them lose access",
			"the binding's Secret, which the inter-operator removes with the binding",
		},
	}
	s.render(w, http.StatusOK, "confirm", sess, "instances", "Delete binding "+name+"?", d)
}

// deleteBinding deletes an SFServiceBinding once confirmed and returns to
// its instance's page; an unconfirmed delete is sent to the confirmation
// page.
func (s *Server) deleteBinding(w http.ResponseWriter, r *http.Request, sess *session) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	if r.PostForm.Get(ConfirmField) != name {
		http.Redirect(w, r, bindingURL(ns, name)+"/delete", http.StatusSeeOther)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	b, err := s.getBinding(ctx, sess, ns, name)
	if err != nil {
		s.showError(w, r, sess, describeError("read the binding "+name+" in namespace "+ns, err))
		return
	}
	back := s.bindingInstanceURL(ctx, sess, ns, b.Spec.InstanceNames())
	// The UID precondition deletes the binding that was confirmed, not one
	// re-created under its name since.
	uid := b.UID
	if err := sess.kube.onboarding.Resource(bindingsGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
		s.showError(w, r, sess, describeError("delete the binding "+name+" in namespace "+ns, err))
		return
	}
	s.log.Info("binding deleted", "user", sess.user, "namespace", ns, "binding", name)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// bindingURL is the path of a binding.
func bindingURL(ns, name string) string {
	return "/ns/" + url.PathEscape(ns) + "/bindings/" + url.PathEscape(name)
}

// getBinding reads the SFServiceBinding ns/name.
func (s *Server) getBinding(ctx context.Context, sess *session, ns, name string) (*osbv1alpha1.SFServiceBinding, error) {
	u, err := sess.kube.onboarding.Resource(bindingsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var b osbv1alpha1.SFServiceBinding
	if err := fromUnstructured(u, &b); err != nil {
		return nil, err
	}
	return &b, nil
}
