package access

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// grantScope is what the phases of one grant share: the request and what
// the phases before found out about it.
type grantScope struct {
	ar *clustersv1alpha1.AccessRequest
	// check is the access policy's check of the requester, nil for a
	// request the policy does not restrict; ceilings bound what the
	// requester may get on the cluster.
	check    *policy.AccessCheck
	ceilings []policy.Ceiling
	// cluster is the target Cluster, clusterKey its namespace/name and
	// target the admin connection to its API server.
	cluster    *clustersv1alpha1.Cluster
	clusterKey string
	target     *target
	// own says which namespaces the requester owns there; want and
	// namespaces are the objects to create and the namespaces to put
	// them in; sa is the ServiceAccount the token is for.
	own        ownership
	want       targetObjects
	namespaces *namespacePlan
	sa         *corev1.ServiceAccount
	// secret is the kubeconfig Secret, tok the token written into it and
	// now when the grant started.
	secret *corev1.Secret
	tok    token
	now    time.Time
}

// grantPhase is one step of a grant. An outcome or an error ends the grant
// there; an error that is a *policy.Violation denies the request.
type grantPhase func(context.Context, *grantScope) (*outcome, error)

// grant creates or refreshes the request's access. The access policy is
// checked step by step as the request is resolved, before anything is read
// through its reference or written to its cluster. On success it returns
// when to come back: when the token is due for refresh, at most after the
// resync interval.
func (r *Reconciler) grant(ctx context.Context, ar *clustersv1alpha1.AccessRequest) (*outcome, time.Duration, error) {
	s := &grantScope{ar: ar}
	for _, phase := range []grantPhase{
		r.checkReference,
		r.resolveCluster,
		r.checkWorkloads,
		r.connectTarget,
		r.checkToken,
		r.planTarget,
		r.markTarget,
		r.applyTarget,
		r.writeKubeconfig,
		r.shareKubeconfig,
	} {
		o, err := phase(ctx, s)
		if v := (*policy.Violation)(nil); errors.As(err, &v) {
			o, err := r.deny(ctx, ar, v)
			return o, 0, err
		}
		if o != nil || err != nil {
			return o, 0, err
		}
	}
	return nil, r.setGranted(s), nil
}

// checkReference checks whether the requester may use what the request
// refers to.
func (r *Reconciler) checkReference(ctx context.Context, s *grantScope) (*outcome, error) {
	check, v, err := r.enforcer.CheckReference(ctx, s.ar)
	if err != nil {
		return policyError(err), nil
	}
	if v != nil {
		return nil, v
	}
	s.check = check
	return nil, nil
}

// resolveCluster finds the Cluster the request is for and what the
// requester may get there.
func (r *Reconciler) resolveCluster(ctx context.Context, s *grantScope) (*outcome, error) {
	cluster, o, err := r.resolve(ctx, s.ar, s.check)
	if o != nil || err != nil {
		return o, err
	}
	s.cluster, s.clusterKey = cluster, client.ObjectKeyFromObject(cluster).String()
	if s.check != nil {
		ceilings, v := s.check.Ceiling(cluster)
		if v != nil {
			return nil, v
		}
		s.ceilings = ceilings
	}
	return nil, nil
}

// connectTarget connects to the cluster's API server with admin rights.
func (r *Reconciler) connectTarget(ctx context.Context, s *grantScope) (*outcome, error) {
	t, o, err := r.connect(ctx, s.cluster)
	s.target = t
	return o, err
}

// checkToken checks the requested token against the ceilings and, on a
// cluster that keeps providers apart, makes sure the admission policies
// that do so are enforced.
func (r *Reconciler) checkToken(ctx context.Context, s *grantScope) (*outcome, error) {
	if s.check == nil {
		return nil, nil
	}
	v, err := policy.CheckToken(ctx, s.target, s.ceilings, s.ar.Spec.Token)
	if err != nil {
		return targetError(err), nil
	}
	if v != nil {
		return nil, v
	}
	s.own = ownershipOf(s.check.Requester, s.ceilings)
	// No provider holds a token on an MCP or a shared workload cluster
	// whose API server does not keep providers apart. The onboarding
	// ceiling holds no Secrets, workloads, namespaces or RBAC to keep apart
	// (only what the platform operator adds, e.g. the marketplace's binding
	// of all users to reading Offerings), so an onboarding cluster gets no
	// policies. The cache is keyed by the Cluster's UID and server: a
	// Cluster of the same name for a new API server gets the policies anew.
	if !s.own.isolated {
		return nil, nil
	}
	if err := r.ensureAdmission(ctx, string(s.cluster.UID)+"@"+s.target.endpoint.host, s.target.Client, s.target.config); err != nil {
		if isUnreachable(err) {
			return targetError(err), nil
		}
		return &outcome{reason: ReasonAdmissionNotEnforced, message: err.Error(), retry: true}, nil
	}
	return nil, nil
}

// planTarget reads what the grant needs on the target before anything is
// written for the request, so that a request to an unreachable cluster
// gets no finalizer it could never be released from, and one for another
// provider's namespace is denied before it has any.
func (r *Reconciler) planTarget(ctx context.Context, s *grantScope) (*outcome, error) {
	s.want = desiredObjects(s.ar, r.accessNamespace, s.own)
	namespaces, err := s.own.plan(ctx, s.target, string(s.ar.UID), s.want.createNamespaces, s.want.requireNamespaces)
	if err != nil {
		return refused(err)
	}
	s.namespaces = namespaces
	if err := s.target.Get(ctx, client.ObjectKey{Name: r.accessNamespace}, &corev1.Namespace{}); err != nil && !apierrors.IsNotFound(err) {
		return targetError(err), nil
	}
	return nil, nil
}

// refused turns an error on the target into the request's outcome: a
// policy violation denies it (the error is returned), anything else is
// retried.
func refused(err error) (*outcome, error) {
	if v := (*policy.Violation)(nil); errors.As(err, &v) {
		return nil, err
	}
	return targetError(err), nil
}

// markTarget puts the finalizer and the target cluster on the request, in
// one patch, before anything is created on the target.
func (r *Reconciler) markTarget(ctx context.Context, s *grantScope) (*outcome, error) {
	ar := s.ar
	if prev := ar.Annotations[TargetClusterAnnotation]; prev != "" && prev != s.clusterKey {
		// status.cluster of a ClusterRequest never changes and clusterRef
		// is immutable, so this only happens when someone edits the
		// annotation; refuse rather than leave the old cluster's objects.
		return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonInvalidSpec,
			message: fmt.Sprintf("annotation %s names Cluster %s, but the request is for %s", TargetClusterAnnotation, prev, s.clusterKey)}, nil
	}
	if controllerutil.ContainsFinalizer(ar, Finalizer) && ar.Annotations[TargetClusterAnnotation] == s.clusterKey {
		return nil, nil
	}
	before := ar.DeepCopy()
	controllerutil.AddFinalizer(ar, Finalizer)
	if ar.Annotations == nil {
		ar.Annotations = map[string]string{}
	}
	ar.Annotations[TargetClusterAnnotation] = s.clusterKey
	status := ar.Status.DeepCopy()
	if err := r.client.Patch(ctx, ar, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("add finalizer to AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
	}
	// The patch response carries the stored status; keep the one being
	// computed.
	ar.Status = *status
	return nil, nil
}

// applyTarget creates the ServiceAccount, namespaces and RBAC of the
// request on the target.
func (r *Reconciler) applyTarget(ctx context.Context, s *grantScope) (*outcome, error) {
	sa, err := applyTarget(ctx, s.target, string(s.ar.UID), r.accessNamespace, s.namespaces, s.want)
	if err != nil {
		return refused(err)
	}
	s.sa = sa
	return nil, nil
}

// writeKubeconfig writes the kubeconfig Secret, with the token it holds
// when that can still be used and a new one otherwise.
func (r *Reconciler) writeKubeconfig(ctx context.Context, s *grantScope) (*outcome, error) {
	ar := s.ar
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(ar), Namespace: ar.Namespace}}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(secret), secret); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("get Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	if secret.ResourceVersion != "" && !metav1.IsControlledBy(secret, ar) {
		return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonSecretConflict,
			message: fmt.Sprintf("Secret %s/%s exists and does not belong to this AccessRequest", secret.Namespace, secret.Name)}, nil
	}
	s.secret, s.now = secret, r.now()
	ttl := requestedTTL(ar)
	tok, ok := tokenFromSecret(secret)
	if !ok || !tok.reusable(s.sa, ttl, s.now) {
		var err error
		if tok, err = mintToken(ctx, s.target, s.sa, ttl, s.now); err != nil {
			return targetError(err), nil
		}
		logf.FromContext(ctx).V(1).Info("Minted token", "serviceAccount", s.sa.Name, "expires", tok.expires)
	}
	s.tok = tok
	return nil, r.writeSecret(ctx, ar, secret, s.target.endpoint, s.sa, tok)
}

// shareKubeconfig lets the requester read the Secret when it is a
// provider's request in its tenant's MCP namespace: only it may, and it
// must before the status names the Secret.
func (r *Reconciler) shareKubeconfig(ctx context.Context, s *grantScope) (*outcome, error) {
	if s.check == nil || s.check.Requester.MCP.Name == "" {
		return nil, nil
	}
	return r.ensureSecretReader(ctx, s.ar, s.check.Requester)
}

// setGranted reports the request granted and returns when to come back.
func (r *Reconciler) setGranted(s *grantScope) time.Duration {
	ar := s.ar
	ar.Status.SecretRef = &common.ObjectReference{Name: s.secret.Name, Namespace: s.secret.Namespace}
	ar.Status.Phase = clustersv1alpha1.RequestGranted
	r.setReady(ar, metav1.ConditionTrue, ReasonGranted,
		fmt.Sprintf("access to Cluster %s is in Secret %s", s.clusterKey, s.secret.Name))
	return min(max(s.tok.refreshAt().Sub(s.now), time.Second), r.resync)
}

// resolve finds the Cluster the request is for. It returns an outcome when
// there is none (yet), and a *policy.Violation error when the requester may
// not use the ClusterRequest it refers to.
func (r *Reconciler) resolve(ctx context.Context, ar *clustersv1alpha1.AccessRequest, check *policy.AccessCheck) (*clustersv1alpha1.Cluster, *outcome, error) {
	var key types.NamespacedName
	switch {
	case ar.Spec.ClusterRef != nil:
		key = ar.Spec.ClusterRef.NamespacedName()
	case ar.Spec.RequestRef != nil:
		k, o, err := r.grantedCluster(ctx, ar.Spec.RequestRef.NamespacedName(), check)
		if o != nil || err != nil {
			return nil, o, err
		}
		key = k
	default:
		return nil, &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonInvalidSpec,
			message: "neither spec.clusterRef nor spec.requestRef is set"}, nil
	}
	cluster := &clustersv1alpha1.Cluster{}
	if err := r.client.Get(ctx, key, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &outcome{phase: clustersv1alpha1.RequestPending, reason: ReasonClusterNotFound,
				message: fmt.Sprintf("Cluster %s does not exist", key)}, nil
		}
		return nil, nil, fmt.Errorf("get Cluster %s: %w", key, err)
	}
	return cluster, nil, nil
}

// grantedCluster returns the Cluster that the ClusterRequest ref was
// granted, or an outcome while it has none.
func (r *Reconciler) grantedCluster(ctx context.Context, ref types.NamespacedName, check *policy.AccessCheck) (types.NamespacedName, *outcome, error) {
	cr := &clustersv1alpha1.ClusterRequest{}
	if err := r.client.Get(ctx, ref, cr); err != nil {
		if apierrors.IsNotFound(err) {
			return types.NamespacedName{}, &outcome{phase: clustersv1alpha1.RequestPending, reason: ReasonClusterRequestNotFound,
				message: fmt.Sprintf("ClusterRequest %s does not exist", ref)}, nil
		}
		return types.NamespacedName{}, nil, fmt.Errorf("get ClusterRequest %s: %w", ref, err)
	}
	if check != nil {
		// Whose ClusterRequest it is decides whether the request may use
		// it, before its cluster is even looked at.
		if v := check.CheckClusterRequest(cr); v != nil {
			return types.NamespacedName{}, nil, v
		}
	}
	switch {
	case cr.Status.IsDenied():
		msg := fmt.Sprintf("ClusterRequest %s was denied", ref)
		if c := apimeta.FindStatusCondition(cr.Status.Conditions, common.ConditionTypeReady); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		return types.NamespacedName{}, &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonClusterRequestDenied, message: msg}, nil
	case cr.Status.Cluster == nil:
		return types.NamespacedName{}, &outcome{phase: clustersv1alpha1.RequestPending, reason: ReasonClusterRequestPending,
			message: fmt.Sprintf("waiting for ClusterRequest %s to be granted", ref)}, nil
	}
	return cr.Status.Cluster.NamespacedName(), nil, nil
}

// target is a connection to a target cluster with admin rights.
type target struct {
	client.Client
	config   *rest.Config
	endpoint endpoint
}

// connect returns a client for the cluster's API server with admin rights,
// or an outcome when the kubeconfig is unusable.
func (r *Reconciler) connect(ctx context.Context, cluster *clustersv1alpha1.Cluster) (*target, *outcome, error) {
	cfg, err := clusters.AdminConfig(ctx, r.client, cluster)
	if err != nil {
		if reason, ok := clusters.ReasonFor(err); ok {
			// No retry: the Cluster controller notices a fixed Secret and
			// the Cluster's status change brings the request back.
			return nil, &outcome{reason: Reason(reason), message: err.Error()}, nil
		}
		return nil, nil, err
	}
	ep, err := endpointFromConfig(cluster.Name, cfg)
	if err != nil {
		return nil, &outcome{reason: ReasonKubeconfigInvalid, message: err.Error()}, nil
	}
	c, err := newTargetClient(cfg)
	if err != nil {
		return nil, &outcome{reason: ReasonKubeconfigInvalid, message: err.Error()}, nil
	}
	return &target{Client: c, config: cfg, endpoint: ep}, nil, nil
}

// targetError turns an error of a target cluster into an outcome: a role
// owned by someone else denies the request (until its spec changes);
// anything else is retried with backoff, the message saying what it was.
func targetError(err error) *outcome {
	var conflict *conflictError
	var missing *namespaceMissingError
	switch {
	case errors.As(err, &conflict):
		return &outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonRoleConflict, message: err.Error()}
	case errors.As(err, &missing):
		return &outcome{reason: ReasonNamespaceMissing, message: err.Error(), retry: true}
	case isUnreachable(err):
		return &outcome{reason: ReasonUnreachable, message: err.Error(), retry: true}
	}
	return &outcome{reason: ReasonApplyFailed, message: err.Error(), retry: true}
}

// writeSecret creates or updates the kubeconfig Secret, owned by the
// request so that it is also collected if the request vanishes.
func (r *Reconciler) writeSecret(ctx context.Context, ar *clustersv1alpha1.AccessRequest, secret *corev1.Secret, ep endpoint, sa *corev1.ServiceAccount, tok token) error {
	data, err := secretData(ep, sa.Name, tok)
	if err != nil {
		return err
	}
	_, err = controllerutil.CreateOrUpdate(ctx, r.client, secret, func() error {
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels[providerv1alpha1.ManagedByLabel] = ManagedByValue
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[ServiceAccountUIDAnnotation] = tok.accountID
		secret.Annotations[TokenTTLAnnotation] = tok.ttl
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = data
		return controllerutil.SetControllerReference(ar, secret, r.client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("write Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}
