package providerrequests

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// Request is one Denied request of a provider.
type Request struct {
	// Kind is AccessRequest or ClusterRequest.
	Kind, Namespace, Name string
	// Reason and Message are those of the request's Ready condition.
	Reason, Message string
}

// String describes r as "<kind> <namespace>/<name> Denied (<reason>):
// <message>".
func (r Request) String() string {
	s := fmt.Sprintf("%s %s/%s Denied", r.Kind, r.Namespace, r.Name)
	if r.Reason != "" {
		s += " (" + r.Reason + ")"
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	return s
}

// DeniedRequests describes the Denied requests of the provider of kind
// (ServiceProvider, …) and name as Request.String does, sorted. c reads the
// platform cluster.
func DeniedRequests(ctx context.Context, c client.Reader, kind, name string) ([]string, error) {
	namespace, ok := Namespace(kind, name)
	if !ok {
		return nil, fmt.Errorf("no provider kind %q", kind)
	}
	denied, err := Denied(ctx, c, kind, name, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(denied))
	for i, d := range denied {
		out[i] = d.String()
	}
	return out, nil
}

// Denied lists the Denied requests of the provider of kind and name whose
// namespace is namespace, sorted by kind, namespace and name. They are the
// requests in the provider's namespace and, for a ServiceProvider, those
// whose managed-by label names it in the platform namespaces of
// ManagedControlPlanes (the label openMCP's clusteraccess library sets
// there, which only the provider may write).
func Denied(ctx context.Context, c client.Reader, kind, name, namespace string) ([]Request, error) {
	f := &finder{c: c, namespace: namespace, mcpNamespace: map[string]bool{}}
	selectors := []client.ListOption{client.InNamespace(namespace)}
	if kind == "ServiceProvider" {
		selectors = append(selectors, client.MatchingLabels{providerv1alpha1.ManagedByLabel: name})
	}
	for _, sel := range selectors {
		if err := f.list(ctx, sel); err != nil {
			return nil, err
		}
	}
	out := f.out
	slices.SortFunc(out, func(a, b Request) int {
		return strings.Compare(a.Kind+"/"+a.Namespace+"/"+a.Name, b.Kind+"/"+b.Namespace+"/"+b.Name)
	})
	return slices.CompactFunc(out, func(a, b Request) bool {
		return a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name
	}), nil
}

// finder collects the Denied requests of one provider.
type finder struct {
	c client.Reader
	// namespace is the provider's namespace.
	namespace string
	// mcpNamespace caches whether a namespace is an MCP's platform
	// namespace.
	mcpNamespace map[string]bool
	out          []Request
}

// list adds the Denied AccessRequests and ClusterRequests that sel selects.
func (f *finder) list(ctx context.Context, sel client.ListOption) error {
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := f.c.List(ctx, ars, sel); err != nil {
		return fmt.Errorf("list AccessRequests: %w", err)
	}
	for i := range ars.Items {
		if err := f.add(ctx, "AccessRequest", &ars.Items[i], ars.Items[i].Status.Status); err != nil {
			return err
		}
	}
	crs := &clustersv1alpha1.ClusterRequestList{}
	if err := f.c.List(ctx, crs, sel); err != nil {
		return fmt.Errorf("list ClusterRequests: %w", err)
	}
	for i := range crs.Items {
		if err := f.add(ctx, "ClusterRequest", &crs.Items[i], crs.Items[i].Status.Status); err != nil {
			return err
		}
	}
	return nil
}

// add records o when it is Denied and in scope; only denied requests cost
// a look at their namespace.
func (f *finder) add(ctx context.Context, kind string, o client.Object, st common.Status) error {
	if st.Phase != clustersv1alpha1.RequestDenied {
		return nil
	}
	ok, err := f.inScope(ctx, o)
	if err != nil {
		return fmt.Errorf("get namespace of %s %s/%s: %w", kind, o.GetNamespace(), o.GetName(), err)
	}
	if !ok {
		return nil
	}
	d := Request{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()}
	if c := apimeta.FindStatusCondition(st.Conditions, common.ConditionTypeReady); c != nil {
		d.Reason, d.Message = c.Reason, c.Message
	}
	f.out = append(f.out, d)
	return nil
}

// inScope: a request in the provider's namespace, or labelled with its
// name in an MCP's platform namespace. Another provider's request labelled
// with this name elsewhere is none of this provider's.
func (f *finder) inScope(ctx context.Context, o client.Object) (bool, error) {
	ns := o.GetNamespace()
	if ns == f.namespace {
		return true, nil
	}
	if ok, seen := f.mcpNamespace[ns]; seen {
		return ok, nil
	}
	n := &corev1.Namespace{}
	if err := f.c.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	_, ok := corev2alpha1.MCPOfNamespace(n)
	f.mcpNamespace[ns] = ok
	return ok, nil
}
