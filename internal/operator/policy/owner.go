package policy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// RequesterFor returns the provider the request obj (an AccessRequest or a
// ClusterRequest) belongs to, by where it lives:
//
//   - in a provider namespace: that provider (providerOfNamespace);
//   - in the platform namespace of a ManagedControlPlane: the ServiceProvider
//     its label openmcp.cloud/managed-by names, as openMCP's clusteraccess
//     library labels what it creates there with the provider's
//     --provider-name. A request without that label (or labelled
//     marketplane-operator) that carries the MCP's own labels is the MCP
//     controller's: not policed. Any other request there, unlabelled or
//     naming no ServiceProvider, gets a Violation;
//   - anywhere else: nil, not policed (a platform operator's).
//
// The label is trusted because the ValidatingAdmissionPolicy of
// internal/operator/mcpaccess lets a provider's ServiceAccounts write
// requests in MCP namespaces only with their own provider's name in it, and
// only the platform operator and the operator can write namespaces and
// their labels.
func RequesterFor(ctx context.Context, c client.Reader, obj client.Object) (*Requester, *Violation, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("get namespace %s: %w", obj.GetNamespace(), err)
	}
	if req, err := providerOfNamespace(ctx, c, ns); err != nil || req != nil {
		return req, nil, err
	}
	mcp, ok := corev2alpha1.MCPOfNamespace(ns)
	if !ok {
		return nil, nil, nil
	}
	what := fmt.Sprintf("%s %s/%s", kindOf(obj), obj.GetNamespace(), obj.GetName())
	owner := obj.GetLabels()[providerv1alpha1.ManagedByLabel]
	if owner == "" || owner == managedByOperator {
		if ownedByMCP(obj, mcp) {
			return nil, nil, nil
		}
		return nil, violation(RuleRequestOwner, "%s is in the platform namespace of ManagedControlPlane %s and has no label %s naming the ServiceProvider it belongs to",
			what, mcp, providerv1alpha1.ManagedByLabel), nil
	}
	sp := &providerv1alpha1.ServiceProvider{}
	if err := c.Get(ctx, client.ObjectKey{Name: owner}, sp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, violation(RuleRequestOwner, "%s: label %s=%s names no ServiceProvider", what, providerv1alpha1.ManagedByLabel, owner), nil
		}
		return nil, nil, fmt.Errorf("get ServiceProvider %s: %w", owner, err)
	}
	req := &Requester{Kind: KindServiceProvider, Name: owner, MCP: mcp}
	if namespaces, err := NamespacesOf(ctx, c, KindServiceProvider, owner); err != nil {
		return nil, nil, err
	} else if len(namespaces) > 0 {
		req.Namespace = namespaces[0]
	}
	if sp.Spec.AccessPolicy != nil {
		req.Policy = *sp.Spec.AccessPolicy.DeepCopy()
	}
	return req, nil, nil
}

// ownedByMCP reports whether obj, in the platform namespace of mcp and
// labelled by no provider, is the MCP controller's: it carries the labels
// that tie it to mcp.
func ownedByMCP(obj client.Object, mcp types.NamespacedName) bool {
	l := obj.GetLabels()
	if owner := l[providerv1alpha1.ManagedByLabel]; owner != "" && owner != managedByOperator {
		return false
	}
	return corev2alpha1.HasMCPLabels(l, mcp.Namespace, mcp.Name)
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *clustersv1alpha1.AccessRequest:
		return "AccessRequest"
	case *clustersv1alpha1.ClusterRequest:
		return "ClusterRequest"
	}
	return fmt.Sprintf("%T", obj)
}
