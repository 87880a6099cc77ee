package code

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// bindResponse is the body of a code-based bind: the kubeconfig of the
// binding's AccessRequest.
type bindResponse struct {
	Credentials bindCredentials `json:"credentials"`
}

// bindCredentials are the credentials of a code-based binding.
type bindCredentials struct {
	// Kubeconfig reaches the instance's ManagedControlPlane with the
	// offering's binding rules.
	Kubeconfig string `json:"kubeconfig"`
}

// Bind creates an AccessRequest on the platform cluster for the
// instance's ManagedControlPlane (its ClusterRequest) with the offering's
// binding rules as one ClusterRole there, waits until it is granted and
// answers 201 with its kubeconfig. An identical re-sent bind answers 200
// with the same credentials.
func (c *Offerings) Bind(ctx context.Context, x *osb.Call, req *osb.BindRequest) (int, any, error) {
	id, bid := req.InstanceID, req.BindingID
	if err := osb.CheckPlatform(x.Identity, req.Context); err != nil {
		return 0, nil, err
	}
	rec, err := c.existingRecord(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if req.ServiceID != rec.serviceID || req.PlanID != rec.planID {
		return 0, nil, osb.BadRequest("service_id and plan_id must be those of the instance.")
	}
	svc := c.catalog.Snapshot().Code().Service(rec.serviceID)
	switch {
	case svc == nil:
		return 0, nil, c.Unserved(ctx, rec.serviceID, osb.BadRequest("The service offering of instance %s is no longer in the catalog; it cannot be bound.", osb.Truncate(id, 100)))
	case !svc.Bindable():
		return 0, nil, osb.BadRequest("Service offering %s is not bindable.", svc.Name)
	}
	if rec.ns.DeletionTimestamp != nil {
		return 0, nil, osb.ConcurrencyError("Instance %s is being deleted.", osb.Truncate(id, 100))
	}
	if !rec.ownsMCP {
		// The tenant's consent is checked again: removing the annotation
		// from the control plane stops new bindings.
		if err := c.mayUse(ctx, id, controlPlaneRef{Namespace: rec.object.Namespace, Name: rec.object.Name}); err != nil {
			return 0, nil, err
		}
	}
	st, err := c.objectState(ctx, rec)
	if err != nil {
		return 0, nil, err
	}
	if st.state != osb.StateSucceeded {
		return 0, nil, osb.ConcurrencyError("Instance %s is not ready (%s); bind it once its last operation succeeded.", osb.Truncate(id, 100), st.state)
	}

	key := client.ObjectKey{Namespace: c.accessNamespace, Name: BindingAccessRequestName(bid)}
	ar := &clustersv1alpha1.AccessRequest{}
	status := http.StatusOK
	err = c.platform.Get(ctx, key, ar)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.createAccessRequest(ctx, rec, bid, key, svc.BindingRules); err != nil {
			return 0, nil, err
		}
		status = http.StatusCreated
	case err != nil:
		return 0, nil, fmt.Errorf("get AccessRequest %s: %w", key, err)
	case ar.Annotations[AnnotationBindingID] != bid || ar.Annotations[sf.AnnotationInstanceID] != id:
		return 0, nil, osb.Conflict("Binding %s already exists for another instance.", osb.Truncate(bid, 100))
	case ar.DeletionTimestamp != nil:
		return 0, nil, osb.ConcurrencyError("Binding %s is being deleted.", osb.Truncate(bid, 100))
	}
	kubeconfig, err := c.awaitGrant(ctx, key)
	if err != nil {
		return 0, nil, err
	}
	c.log.V(1).Info("Bound a code-based instance", "namespace", rec.ns.Name, "accessRequest", key.String(), "requestIdentity", x.RequestID)
	return status, bindResponse{Credentials: bindCredentials{Kubeconfig: string(kubeconfig)}}, nil
}

// createAccessRequest creates the AccessRequest of binding bid of rec.
// It lives in the broker's namespace, which is neither a provider's nor an
// MCP's, so the operator's access policy treats it as the platform
// operator's; the rights it asks for are the offering's binding rules,
// which the platform operator declared on the ServiceProvider.
func (c *Offerings) createAccessRequest(ctx context.Context, rec *record, bid string, key client.ObjectKey, rules []rbacv1.PolicyRule) error {
	mcp := &corev2alpha1.ManagedControlPlane{}
	mcpKey := rec.object.key()
	if err := c.onboarding.Get(ctx, mcpKey, mcp); err != nil {
		if apierrors.IsNotFound(err) {
			return osb.ConcurrencyError("The ManagedControlPlane of instance %s is gone.", osb.Truncate(rec.id, 100))
		}
		return fmt.Errorf("get ManagedControlPlane %s: %w", mcpKey, err)
	}
	ar := &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   key.Namespace,
			Name:        key.Name,
			Labels:      map[string]string{sf.LabelManagedBy: sf.ManagedByBroker, LabelCodeInstance: rec.ns.Name},
			Annotations: map[string]string{sf.AnnotationInstanceID: rec.id, AnnotationBindingID: bid},
		},
		Spec: clustersv1alpha1.AccessRequestSpec{
			RequestRef: &common.ObjectReference{Namespace: corev2alpha1.PlatformNamespace(mcp), Name: mcp.Name},
			Token:      &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: rules}}},
		},
	}
	if err := c.platform.Create(ctx, ar); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return osb.ConcurrencyError("Another request for binding %s is in progress; try again.", osb.Truncate(bid, 100))
		}
		return fmt.Errorf("create AccessRequest %s: %w", key, err)
	}
	return nil
}

// awaitGrant waits until the AccessRequest at key is granted and returns
// the kubeconfig of its Secret. The kubeconfig holds a token: it is never
// logged.
func (c *Offerings) awaitGrant(ctx context.Context, key client.ObjectKey) ([]byte, error) {
	var kubeconfig []byte
	var last string
	err := wait.PollUntilContextTimeout(ctx, c.pollInterval, c.bindTimeout, true, func(ctx context.Context) (bool, error) {
		ar := &clustersv1alpha1.AccessRequest{}
		if err := c.platform.Get(ctx, key, ar); err != nil {
			return false, fmt.Errorf("get AccessRequest %s: %w", key, err)
		}
		if cond := apimeta.FindStatusCondition(ar.Status.Conditions, string(common.ConditionTypeReady)); cond != nil {
			last = cond.Message
		}
		switch {
		case ar.Status.IsDenied():
			return false, &osb.Error{Status: http.StatusInternalServerError,
				Description: fmt.Sprintf("The platform refused the binding's access to the control plane: %s", last)}
		case !ar.Status.IsGranted() || ar.Status.SecretRef == nil:
			return false, nil
		}
		var err error
		kubeconfig, err = c.grantedKubeconfig(ctx, key, ar)
		return kubeconfig != nil, err
	})
	if err != nil {
		var e *osb.Error
		if errors.As(err, &e) {
			return nil, e
		}
		if wait.Interrupted(err) && ctx.Err() == nil {
			return nil, &osb.Error{Status: http.StatusServiceUnavailable, RetryAfter: 5 * time.Second,
				Description: fmt.Sprintf("The binding's credentials were not issued in time (%s); send the same request again.", last)}
		}
		return nil, err
	}
	return kubeconfig, nil
}

// grantedKubeconfig returns the kubeconfig of ar, the granted
// AccessRequest at key, from its Secret; nil while the Secret is missing
// or empty. The kubeconfig holds a token: it is never logged.
func (c *Offerings) grantedKubeconfig(ctx context.Context, key client.ObjectKey, ar *clustersv1alpha1.AccessRequest) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := c.platform.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: ar.Status.SecretRef.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get the kubeconfig Secret of AccessRequest %s: %w", key, err)
	}
	if kubeconfig := secret.Data[clustersv1alpha1.SecretKeyKubeconfig]; len(kubeconfig) > 0 {
		return kubeconfig, nil
	}
	return nil, nil
}

// Unbind deletes the binding's AccessRequest, which revokes its
// credentials on the control plane, and waits until it is gone.
func (c *Offerings) Unbind(ctx context.Context, x *osb.Call, req *osb.DeleteRequest) (int, any, error) {
	id, bid := req.InstanceID, req.BindingID
	key := client.ObjectKey{Namespace: c.accessNamespace, Name: BindingAccessRequestName(bid)}
	ar := &clustersv1alpha1.AccessRequest{}
	if err := c.platform.Get(ctx, key, ar); err != nil {
		if apierrors.IsNotFound(err) {
			return http.StatusGone, osb.EmptyObject, nil
		}
		return 0, nil, fmt.Errorf("get AccessRequest %s: %w", key, err)
	}
	if ar.Annotations[sf.AnnotationInstanceID] != id || ar.Annotations[AnnotationBindingID] != bid {
		return http.StatusGone, osb.EmptyObject, nil
	}
	if err := c.platform.Delete(ctx, ar); err != nil && !apierrors.IsNotFound(err) {
		return 0, nil, fmt.Errorf("delete AccessRequest %s: %w", key, err)
	}
	err := wait.PollUntilContextTimeout(ctx, c.pollInterval, c.bindTimeout, true, func(ctx context.Context) (bool, error) {
		err := c.platform.Get(ctx, key, &clustersv1alpha1.AccessRequest{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		if wait.Interrupted(err) && ctx.Err() == nil {
			return 0, nil, &osb.Error{Status: http.StatusServiceUnavailable, RetryAfter: 5 * time.Second,
				Description: "The binding's credentials are still being revoked; send the same request again."}
		}
		return 0, nil, err
	}
	c.log.V(1).Info("Unbound a code-based instance", "accessRequest", key.String(), "requestIdentity", x.RequestID)
	return http.StatusOK, osb.EmptyObject, nil
}

// deleteBindings deletes the AccessRequests of every binding of rec.
func (c *Offerings) deleteBindings(ctx context.Context, rec *record) error {
	list := &clustersv1alpha1.AccessRequestList{}
	if err := c.platform.List(ctx, list, client.InNamespace(c.accessNamespace), client.MatchingLabels{LabelCodeInstance: rec.ns.Name}); err != nil {
		return fmt.Errorf("list the AccessRequests of instance %s: %w", rec.ns.Name, err)
	}
	for i := range list.Items {
		if err := c.platform.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete AccessRequest %s: %w", list.Items[i].Name, err)
		}
	}
	return nil
}

// unservedRetryAfter is how soon a platform should try again a request
// on an instance whose offering is out of the catalog for a while.
const unservedRetryAfter = 5 * time.Second

// Unserved answers a request on an instance whose offering the catalog
// does not serve: 503 with Retry-After while its Offering exists and only
// its provider is not Ready (an operator restarting or failing over on a
// busy machine makes it so for seconds), gone otherwise (which may be nil).
func (c *Offerings) Unserved(ctx context.Context, serviceID string, gone error) error {
	list := &marketplacev1alpha1.OfferingList{}
	if err := c.onboarding.List(ctx, list); err != nil {
		return fmt.Errorf("list Offerings: %w", err)
	}
	for i := range list.Items {
		o := &list.Items[i]
		if catalog.OfferingServiceID(o.Name) == serviceID && o.DeletionTimestamp == nil && !o.Spec.Ready {
			return &osb.Error{Status: http.StatusServiceUnavailable, RetryAfter: unservedRetryAfter,
				Description: fmt.Sprintf("The service offering %s is not served at the moment: its provider is not Ready. Send the request again.", o.Name)}
		}
	}
	return gone
}
