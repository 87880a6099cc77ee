package provider

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// scope is what the phases of one reconcile of a provider share: the
// object, its status (written by the caller), the logger and what the
// phases before found out.
type scope[T client.Object] struct {
	obj    T
	names  names
	status *providerv1alpha1.DeploymentStatus
	gen    int64
	log    logr.Logger
	// workload is the provider as the Deployer sees it; own is who owns
	// which API groups; tenants is how the tenants' roles went.
	workload *deploy.Workload
	own      *policy.Ownership
	tenants  tenantRolesResult
}

// initializedf sets the Initialized condition.
func (s *scope[T]) initializedf(status metav1.ConditionStatus, reason providerv1alpha1.ConditionReason, format string, args ...any) {
	setConditionf(s.status, s.gen, providerv1alpha1.ConditionInitialized, status, reason, format, args...)
}

// readyf sets the Ready condition.
func (s *scope[T]) readyf(status metav1.ConditionStatus, reason providerv1alpha1.ConditionReason, format string, args ...any) {
	setConditionf(s.status, s.gen, providerv1alpha1.ConditionReady, status, reason, format, args...)
}

// initBlockedf reports that init cannot start yet; Ready then waits for it.
func (s *scope[T]) initBlockedf(reason providerv1alpha1.ConditionReason, format string, args ...any) {
	s.initializedf(metav1.ConditionFalse, reason, format, args...)
	s.readyf(metav1.ConditionFalse, providerv1alpha1.ReasonProviderInstallationPending, "waiting for init of generation %d", s.gen)
}

// phase is one step of reconcileNormal. A result or an error ends the
// reconcile there; nil and nil go on with the next phase.
type phase[T client.Object] func(context.Context, *scope[T]) (*ctrl.Result, error)

// done ends a reconcile with res.
func done(res ctrl.Result) (*ctrl.Result, error) { return &res, nil }

// reconcileNormal sets up the provider's namespace, service accounts,
// image pull secrets and RBAC, runs init and, once init succeeded for the
// current generation, run. It records the outcome in the conditions of
// obj's status; the caller writes them.
func (r *Reconciler[T]) reconcileNormal(ctx context.Context, obj T, n names) (res ctrl.Result, err error) {
	s := &scope[T]{obj: obj, names: n, status: r.kind.Status(obj), gen: obj.GetGeneration(), log: logf.FromContext(ctx)}
	// The tenants' roles and the provider's deployment wait for nothing of
	// each other; how the roles went joins the outcome at the end.
	defer func() { res, err = s.tenants.join(res, err) }()
	for _, p := range []phase[T]{
		r.validateSpec,
		r.reconcileNamespace,
		r.reconcileServiceAccounts,
		r.reconcileOwnership,
		r.reconcileRBAC,
		r.reconcileInit,
		r.reconcileRun,
	} {
		if res, err := p(ctx, s); res != nil || err != nil {
			if res == nil {
				return ctrl.Result{}, err
			}
			return *res, err
		}
	}
	return ctrl.Result{}, nil
}

// validateSpec stops at a bad spec: it says so and waits for the spec to
// change, which triggers the next reconcile. Retrying could not help.
func (r *Reconciler[T]) validateSpec(_ context.Context, s *scope[T]) (*ctrl.Result, error) {
	if problems := validate(r.kind.Spec(s.obj)); problems != "" {
		s.log.V(1).Info("Spec is invalid; waiting for it to change", "problems", problems)
		s.initializedf(metav1.ConditionFalse, ReasonInvalidSpec, "%s", problems)
		s.readyf(metav1.ConditionFalse, ReasonInvalidSpec, "%s", problems)
		return done(ctrl.Result{})
	}
	s.workload = r.workload(s.obj, s.names)
	return nil, nil
}

// reconcileNamespace creates the provider's namespace, waiting while one of
// an earlier provider of the same name is still being deleted.
func (r *Reconciler[T]) reconcileNamespace(ctx context.Context, s *scope[T]) (*ctrl.Result, error) {
	w := s.workload
	terminating, err := r.ensureNamespace(ctx, w)
	if err != nil {
		s.initBlockedf(providerv1alpha1.ReasonInitJobCreationFailed, "creating namespace %s failed: %v", w.Namespace, err)
		return nil, err
	}
	if terminating {
		s.log.V(1).Info("Waiting for the namespace of an earlier provider to be deleted", "namespace", w.Namespace)
		s.initBlockedf(providerv1alpha1.ReasonInitPending, "namespace %s is still being deleted", w.Namespace)
		return done(ctrl.Result{RequeueAfter: r.opts.waitInterval})
	}
	return nil, nil
}

// reconcileServiceAccounts creates the service accounts of init and run
// and copies the image pull secrets they use.
func (r *Reconciler[T]) reconcileServiceAccounts(ctx context.Context, s *scope[T]) (*ctrl.Result, error) {
	if err := r.ensureServiceAccounts(ctx, s.workload); err != nil {
		s.initBlockedf(providerv1alpha1.ReasonInitJobCreationFailed, "creating service accounts failed: %v", err)
		return nil, err
	}
	missing, err := r.ensurePullSecrets(ctx, s.workload)
	if err != nil {
		s.initBlockedf(providerv1alpha1.ReasonInitJobCreationFailed, "copying image pull secrets failed: %v", err)
		return nil, err
	}
	if missing != "" {
		// A user error, but one that can resolve itself when the Secret
		// is created; there is no watch on Secrets, so look again later.
		s.log.V(1).Info("Waiting for an image pull secret", "problem", missing)
		s.initBlockedf(providerv1alpha1.ReasonInitJobCreationFailed, "%s", missing)
		return done(ctrl.Result{RequeueAfter: r.opts.missingSecretInterval})
	}
	return nil, nil
}

// reconcileOwnership works out which API groups the provider owns, reports
// its resources and requests, records the groups and sets up its tenants'
// roles. The run role grants only the API groups the provider owns;
// status.resources is the provider's own word and may name anything.
//
//nolint:unparam // a phase: all phases share one signature
func (r *Reconciler[T]) reconcileOwnership(ctx context.Context, s *scope[T]) (*ctrl.Result, error) {
	own, err := r.ownership(ctx)
	if err != nil {
		s.readyf(metav1.ConditionFalse, providerv1alpha1.ReasonProviderInstallationFailed, "computing the API groups the provider owns failed: %v", err)
		return nil, err
	}
	s.own = own
	r.setResourcesAccepted(ctx, s.status, s.obj, own)
	if err := r.setRequestsGranted(ctx, s.status, s.obj, s.workload.Namespace); err != nil {
		// Only a report: the deployment goes on, the next reconcile
		// looks again.
		setConditionf(s.status, s.gen, ConditionRequestsGranted, metav1.ConditionUnknown, ReasonListFailed, "listing the provider's requests failed: %v", err)
		s.log.Error(err, "List the provider's requests")
	}
	if err := r.recordOwnedGroups(ctx, s.obj, own); err != nil {
		s.readyf(metav1.ConditionFalse, providerv1alpha1.ReasonProviderInstallationFailed, "recording the API groups the provider owns failed: %v", err)
		return nil, err
	}
	s.tenants = r.ensureTenantRoles(ctx, s.obj, s.workload, s.names, own)
	return nil, nil
}

// reconcileRBAC applies the admission policy on provider CRDs and the RBAC
// of the init and run service accounts. The policy comes before init runs:
// init may write CRDs, but only of groups the provider owns or can still
// claim.
//
//nolint:unparam // a phase: all phases share one signature
func (r *Reconciler[T]) reconcileRBAC(ctx context.Context, s *scope[T]) (*ctrl.Result, error) {
	if err := r.ensureCRDGroupsPolicy(ctx, s.own); err != nil {
		s.initBlockedf(providerv1alpha1.ReasonInitJobCreationFailed, "applying the admission policy on provider CRDs failed: %v", err)
		return nil, err
	}
	grants := r.grants(s.obj, s.workload, s.names, s.own.Groups(r.kind.Name, s.obj.GetName()))
	if err := r.ensureGrant(ctx, s.workload, grants[0]); err != nil {
		s.initBlockedf(providerv1alpha1.ReasonInitJobCreationFailed, "setting up RBAC of the init service account failed: %v", err)
		return nil, err
	}
	if err := r.ensureGrant(ctx, s.workload, grants[1]); err != nil {
		s.readyf(metav1.ConditionFalse, providerv1alpha1.ReasonProviderInstallationFailed, "setting up RBAC of the run service account failed: %v", err)
		return nil, err
	}
	return nil, nil
}

// reconcileInit runs init for the current generation and reports how far
// it got; the reconcile goes on to run only once it succeeded.
func (r *Reconciler[T]) reconcileInit(ctx context.Context, s *scope[T]) (*ctrl.Result, error) {
	is, err := r.deployer.Init(ctx, s.workload)
	if err != nil {
		s.initBlockedf(providerv1alpha1.ReasonInitJobCreationFailed, "starting init failed: %v", err)
		return nil, fmt.Errorf("init %s %s: %w", r.kind.Name, s.obj.GetName(), err)
	}
	if is.PreviousFailure != "" && r.opts.recorder != nil {
		// A failure is reported when attempt 2 starts too: the operator
		// may have looked only after the backoff (a busy machine), and
		// then the condition never said InitFailed. An operator that did
		// report it adds to the same event series (same reason).
		r.opts.recorder.Eventf(s.obj, nil, corev1.EventTypeWarning, string(providerv1alpha1.ReasonInitFailed), string(providerv1alpha1.ConditionInitialized),
			"%s=%s: %s", providerv1alpha1.ConditionInitialized, metav1.ConditionFalse, is.PreviousFailure)
	}
	switch is.State {
	case deploy.InitSucceeded:
		s.initializedf(metav1.ConditionTrue, providerv1alpha1.ReasonInitCompleted, "%s", orText(is.Message, "init completed"))
		return nil, nil
	case deploy.InitFailed:
		s.initBlockedf(providerv1alpha1.ReasonInitFailed, "%s", orText(is.Message, "init failed"))
	case deploy.InitRunning:
		s.initBlockedf(providerv1alpha1.ReasonInitRunning, "%s", orText(is.Message, "init is running"))
	default:
		s.initBlockedf(providerv1alpha1.ReasonInitPending, "%s", orText(is.Message, "init has not started yet"))
	}
	// The run instances of an earlier generation, if any, keep running
	// until init of this one succeeded.
	s.log.V(1).Info("Waiting for init", "state", is.State, "attempt", is.Attempt, "retryAfter", is.RetryAfter)
	return done(ctrl.Result{RequeueAfter: is.RetryAfter})
}

// reconcileRun deploys the run instances and reports whether they are
// ready.
//
//nolint:unparam // a phase: all phases share one signature
func (r *Reconciler[T]) reconcileRun(ctx context.Context, s *scope[T]) (*ctrl.Result, error) {
	rs, err := r.deployer.Run(ctx, s.workload)
	if err != nil {
		s.readyf(metav1.ConditionFalse, providerv1alpha1.ReasonProviderInstallationFailed, "deploying the run instances failed: %v", err)
		return nil, fmt.Errorf("run %s %s: %w", r.kind.Name, s.obj.GetName(), err)
	}
	s.status.Metrics = metricsStatus(rs.MetricsService)
	if !rs.Ready {
		reason := providerv1alpha1.ReasonProviderNotReady
		if rs.Crashing {
			reason = providerv1alpha1.ReasonProviderCrashing
		}
		s.readyf(metav1.ConditionFalse, reason, "%s", orText(rs.Message, "the run instances are not ready yet"))
		return nil, nil
	}
	s.readyf(metav1.ConditionTrue, providerv1alpha1.ReasonProviderReady, "%s", orText(rs.Message, "the provider is running"))
	return nil, nil
}
