package access

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/provider"
)

// Names of the admission policies the controller installs on every target
// cluster on which it grants a provider access. They keep providers apart
// where RBAC cannot: RBAC grants a kind in every namespace or in named ones,
// never "in the namespaces this provider created", and never "Secrets, but
// not of this type".
const (
	// IsolationPolicyName names the ValidatingAdmissionPolicy and its
	// binding (isolationPolicy).
	IsolationPolicyName = "marketplane-provider-isolation"
	// NamespaceOwnerPolicyName names the MutatingAdmissionPolicy and its
	// binding that label a namespace a provider creates with the provider
	// (namespaceOwnerPolicy); installed where the cluster serves them.
	NamespaceOwnerPolicyName = "marketplane-provider-namespace-owner"
	// ProbeRoleName names the ClusterRole and ClusterRoleBinding that let
	// the probe identity (probeAdmission) create namespaces, so that its
	// dry-run requests pass RBAC and reach admission.
	ProbeRoleName = "marketplane-admission-probe"
)

// ProviderID is the name of a provider on target clusters: its namespace on
// the platform cluster, "<sp|cp|ps>-<name>" (shortened with a hash when
// too long; a DNS label). It is the value of NamespaceOwnerLabel and the
// suffix of the names of the provider's ServiceAccounts there
// (ServiceAccountNameFor). It is empty for a kind that is not a provider.
func ProviderID(kind, name string) string {
	ns, _, ok := provider.RunServiceAccount(kind, name)
	if !ok {
		return ""
	}
	return ns
}

// probeProvider is the provider ID the controller impersonates to see that
// a target's API server enforces the policies (probeAdmission). No
// provider has it: provider IDs start with sp-, cp- or ps-.
const probeProvider = "marketplane-admission-probe"

// The CEL of isolationPolicy. A provider's identity on a target is one of
// the ServiceAccounts of its AccessRequests, "ar-<hash>.<provider ID>" in
// the access namespace; the MCP controller's and other requests outside
// provider namespaces have no "." and are not matched.
const (
	celAccount  = `request.userInfo.username.split(':')[3]`
	celProvider = `variables.account.substring(variables.account.indexOf('.') + 1)`
	celIsNS     = `request.resource.group == '' && request.resource.resource == 'namespaces'`
	// celPodSpec is the Pod spec an object creates Pods from, or null.
	celPodSpec = `object == null || variables.subResource != '' ? null : ` +
		`request.resource.group == '' && request.resource.resource == 'pods' ? (has(object.spec) ? object.spec : null) : ` +
		`(request.resource.group == 'apps' && request.resource.resource in ['deployments', 'replicasets', 'statefulsets', 'daemonsets']) || ` +
		`(request.resource.group == 'batch' && request.resource.resource == 'jobs') || ` +
		`(request.resource.group == '' && request.resource.resource == 'replicationcontrollers') ? ` +
		`(has(object.spec) && has(object.spec.template) && has(object.spec.template.spec) ? object.spec.template.spec : null) : ` +
		`request.resource.group == 'batch' && request.resource.resource == 'cronjobs' ? ` +
		`(has(object.spec) && has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) && ` +
		`has(object.spec.jobTemplate.spec.template.spec) ? object.spec.jobTemplate.spec.template.spec : null) : null`
	// celPodAccount is the ServiceAccount the Pods of celPodSpec run as,
	// "" when it names none.
	celPodAccount = `variables.podSpec == null ? '' : ` +
		`has(variables.podSpec.serviceAccountName) ? variables.podSpec.serviceAccountName : ` +
		`has(variables.podSpec.serviceAccount) ? variables.podSpec.serviceAccount : ''`
	// celMintsToken: the request yields a token of a ServiceAccount: a
	// Secret the token controller fills, a TokenRequest, Pods running as a
	// named ServiceAccount (whose token is mounted into them), or exec,
	// attach and ephemeral containers in a Pod (which reach its token).
	celMintsToken = `(request.resource.group == '' && request.resource.resource == 'secrets' && variables.subResource == '' && ` +
		`object != null && has(object.type) && object.type == 'kubernetes.io/service-account-token') || ` +
		`(request.resource.group == '' && request.resource.resource == 'serviceaccounts' && variables.subResource == 'token') || ` +
		`(request.resource.group == '' && request.resource.resource == 'pods' && variables.subResource in ['exec', 'attach', 'ephemeralcontainers']) || ` +
		`!(variables.podAccount in ['', 'default'])`
)

// celWebhookGroups: a webhook configuration a provider writes intercepts
// only API groups of custom resources, never a Kubernetes group (the core
// group, groups without a dot, *.k8s.io) nor all groups. A webhook on
// Pods, workloads, Secrets, ServiceAccounts or RBAC would let one provider
// change what another provider, the tenant or the operator writes there:
// run another provider's Deployment with its own image under that
// provider's ServiceAccount, add itself to a binding, or refuse them all.
const celWebhookGroups = `!(request.resource.group == 'admissionregistration.k8s.io' && ` +
	`request.resource.resource in ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations']) || object == null || !has(object.webhooks) || ` +
	`object.webhooks.all(w, !has(w.rules) || w.rules.all(r, has(r.apiGroups) && ` +
	`r.apiGroups.all(g, g.contains('.') && g != 'k8s.io' && !g.endsWith('.k8s.io'))))`

// celBindings: outside its own namespaces (and in every
// ClusterRoleBinding) a provider binds roles only to its own AccessRequests'
// ServiceAccounts and to users and groups that are not Kubernetes' own.
// RBAC lets it bind whatever it holds to anyone; bound to a ServiceAccount
// it creates in a namespace of its own (whose token it may mint there), or
// to a group such as system:serviceaccounts, its rights would act under
// an identity these rules do not know, and do what they refuse it. Inside
// its own namespaces a binding confines the rights to them.
//
// A binder (ownership.binder, BinderMarker in its ServiceAccount's name)
// may also bind ServiceAccounts of any namespace but the access namespace:
// its domain service's own identities, which are then not limited by these
// rules.
func celBindings(accessNamespace string) string {
	return `!(request.resource.group == 'rbac.authorization.k8s.io' && request.resource.resource in ['rolebindings', 'clusterrolebindings'] && ` +
		`variables.subResource == '' && object != null) || ` +
		`(request.resource.resource == 'rolebindings' && variables.namespaceOwner == variables.provider) || !has(object.subjects) || ` +
		`object.subjects.all(s, s.kind == 'ServiceAccount' ? ` +
		fmt.Sprintf(`(has(s.namespace) && s.namespace == '%[1]s' && s.name.startsWith('ar-') && s.name.endsWith('.' + variables.provider)) || `+
			`(variables.binder && has(s.namespace) && s.namespace != '%[1]s') : `, accessNamespace) +
		`!s.name.startsWith('system:'))`
}

// celBinder: the request comes from a binder's ServiceAccount.
const celBinder = `variables.account.substring(0, variables.account.indexOf('.')).endsWith('` + BinderMarker + `')`

// providerMatch matches the requests of providers' ServiceAccounts in
// accessNamespace.
func providerMatch(accessNamespace string) []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{{
		Name: "provider-service-account",
		Expression: fmt.Sprintf(`request.userInfo.username.startsWith('system:serviceaccount:%s:') && `+
			`request.userInfo.username.split(':').size() == 4 && request.userInfo.username.split(':')[3].contains('.')`, accessNamespace),
	}}
}

// labelOf is the CEL of the value of NamespaceOwnerLabel on obj, empty when
// it has none.
func labelOf(obj string) string {
	return fmt.Sprintf(`%[1]s != null && has(%[1]s.metadata.labels) && '%[2]s' in %[1]s.metadata.labels ? %[1]s.metadata.labels['%[2]s'] : ''`,
		obj, NamespaceOwnerLabel)
}

// isolationPolicy is the ValidatingAdmissionPolicy that keeps every
// provider to its own on a target cluster. A provider's ServiceAccounts
// (and only they) may not:
//   - write anything in accessNamespace, which holds every request's
//     ServiceAccount (a token Secret or a Pod there would give it another
//     request's token, the MCP's admin token included);
//   - write anything in a namespace another provider owns
//     (NamespaceOwnerLabel);
//   - create a namespace not labelled as its own, change a namespace's
//     owner, change another provider's namespace, or delete a namespace
//     that is not its own;
//   - obtain a token of a ServiceAccount outside its own namespaces: a
//     Secret of type kubernetes.io/service-account-token, a TokenRequest,
//     a Pod (or a workload's Pod template) running as a ServiceAccount
//     other than default, exec, attach or ephemeral containers;
//   - write a webhook configuration that intercepts a Kubernetes API group
//     (celWebhookGroups);
//   - bind roles, outside its own namespaces, to ServiceAccounts other
//     than its own AccessRequests' or to system: users and groups
//     (celBindings), which would let its rights act under an identity
//     these rules do not limit.
//
// RBAC cannot say any of this: the ceilings of the access policy grant
// Secrets, workloads, namespaces and webhook configurations cluster-wide on
// an MCP, and namespaces cluster-wide on a shared workload cluster.
func isolationPolicy(accessNamespace string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	label := NamespaceOwnerLabel
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: IsolationPolicyName, Labels: admissionLabels()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete, admissionregistrationv1.Connect},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}},
					},
				}},
			},
			MatchConditions: providerMatch(accessNamespace),
			Variables: []admissionregistrationv1.Variable{
				{Name: "account", Expression: celAccount},
				{Name: "provider", Expression: celProvider},
				{Name: "binder", Expression: celBinder},
				// Absent for cluster-scoped objects, and the name for
				// generated names.
				{Name: "requestNamespace", Expression: `has(request.namespace) ? request.namespace : ''`},
				{Name: "requestName", Expression: `has(request.name) ? request.name : ''`},
				{Name: "subResource", Expression: `has(request.subResource) ? request.subResource : ''`},
				{Name: "isNamespace", Expression: celIsNS},
				{Name: "namespaceOwner", Expression: labelOf("namespaceObject")},
				{Name: "newOwner", Expression: labelOf("object")},
				{Name: "oldOwner", Expression: labelOf("oldObject")},
				{Name: "podSpec", Expression: celPodSpec},
				{Name: "podAccount", Expression: celPodAccount},
				{Name: "mintsToken", Expression: celMintsToken},
			},
			Validations: []admissionregistrationv1.Validation{
				{
					Expression: fmt.Sprintf(`variables.requestNamespace != '%[1]s' && !(variables.isNamespace && variables.requestName == '%[1]s')`, accessNamespace),
					Message: fmt.Sprintf("namespace %s holds the ServiceAccounts of every AccessRequest on this cluster, the ManagedControlPlane's admin access among them; "+
						"a provider may not write in it", accessNamespace),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: `variables.isNamespace || variables.namespaceOwner == '' || variables.namespaceOwner == variables.provider`,
					MessageExpression: fmt.Sprintf(`'namespace ' + variables.requestNamespace + ' belongs to another provider (label %s); `+
						`a provider may write only in its own namespaces and in those no provider owns'`, label),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: `!variables.isNamespace || (request.operation == 'CREATE' ? variables.newOwner == variables.provider : ` +
						`request.operation == 'DELETE' ? variables.oldOwner == variables.provider : ` +
						`variables.newOwner == variables.oldOwner && (variables.oldOwner == '' || variables.oldOwner == variables.provider))`,
					MessageExpression: fmt.Sprintf(`request.operation == 'CREATE' ? `+
						`'a namespace a provider creates must carry the label %[1]s=' + variables.provider + ' (the cluster sets it where it serves MutatingAdmissionPolicies)' : `+
						`request.operation == 'DELETE' ? `+
						`'namespace ' + variables.requestName + ' is not labelled %[1]s=' + variables.provider + '; a provider may delete only the namespaces it created' : `+
						`'a provider may not change the label %[1]s of a namespace, nor a namespace another provider created'`, label),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: `!variables.mintsToken || variables.namespaceOwner == variables.provider`,
					MessageExpression: fmt.Sprintf(`'a provider may obtain a ServiceAccount token (a Secret of type kubernetes.io/service-account-token, a TokenRequest, `+
						`Pods running as a ServiceAccount other than default, exec, attach or ephemeral containers) only in the namespaces it created; namespace ' + `+
						`variables.requestNamespace + ' is not labelled %s=' + variables.provider`, label),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: celBindings(accessNamespace),
					Message: "a provider may bind roles to other ServiceAccounts than its own AccessRequests', or to system: users and groups, " +
						"only in RoleBindings in the namespaces it created: elsewhere its rights would act under an identity these rules do not limit",
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: celWebhookGroups,
					Message: "a provider's webhooks may intercept only API groups of custom resources, " +
						"not the core group, groups without a dot, *.k8s.io or all groups",
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
}

// isolationBinding binds isolationPolicy to the whole cluster.
func isolationBinding() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: IsolationPolicyName, Labels: admissionLabels()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        IsolationPolicyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}

// namespaceOwnerPolicy is the MutatingAdmissionPolicy that labels every
// namespace a provider's ServiceAccount creates with the provider
// (NamespaceOwnerLabel), whatever the provider set: providers need not know
// the label, and none can create a namespace in another's name.
// isolationPolicy checks the label, so where the cluster does not serve
// MutatingAdmissionPolicies (Kubernetes before 1.36, unless enabled) a
// provider must set it itself.
func namespaceOwnerPolicy(accessNamespace string) *admissionregistrationv1.MutatingAdmissionPolicy {
	return &admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: NamespaceOwnerPolicyName, Labels: admissionLabels()},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}},
					},
				}},
			},
			MatchConditions: providerMatch(accessNamespace),
			Variables: []admissionregistrationv1.Variable{
				{Name: "account", Expression: celAccount},
				{Name: "provider", Expression: celProvider},
			},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: fmt.Sprintf(`Object{metadata: Object.metadata{labels: {'%s': variables.provider}}}`, NamespaceOwnerLabel),
				},
			}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
}

// namespaceOwnerBinding binds namespaceOwnerPolicy to the whole cluster.
func namespaceOwnerBinding() *admissionregistrationv1.MutatingAdmissionPolicyBinding {
	return &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: NamespaceOwnerPolicyName, Labels: admissionLabels()},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: NamespaceOwnerPolicyName},
	}
}

// probeUser is the identity of the probe: a ServiceAccount of a made-up
// provider in the access namespace, where only the operator writes, so no
// token of it exists.
func probeUser(accessNamespace string) string {
	return fmt.Sprintf("system:serviceaccount:%s:ar-0000000000000000.%s", accessNamespace, probeProvider)
}

// probeRole lets the probe create namespaces (dry run only, by its code).
func probeRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: ProbeRoleName, Labels: admissionLabels()},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}}},
	}
}

// probeBinding binds probeRole to the probe's identity.
func probeBinding(accessNamespace string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ProbeRoleName, Labels: admissionLabels()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ProbeRoleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: probeUser(accessNamespace)}},
	}
}

func admissionLabels() map[string]string {
	return map[string]string{providerv1alpha1.ManagedByLabel: ManagedByValue}
}

// admissionState remembers, per target cluster, when this process last
// saw the policies applied and enforced, and their resource versions: the
// policies are applied again (which repairs a deleted or edited one) at most
// every resync interval, and the API server is probed again only when they
// changed.
type admissionState struct {
	mu       sync.Mutex
	clusters map[string]admissionSeen
}

type admissionSeen struct {
	at time.Time
	// versions are the resource versions of all policies and bindings,
	// validating those of isolationPolicy and its binding.
	versions, validating string
}

func (s *admissionState) get(cluster string) admissionSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clusters[cluster]
}

func (s *admissionState) set(cluster string, seen admissionSeen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusters == nil {
		s.clusters = map[string]admissionSeen{}
	}
	s.clusters[cluster] = seen
}

// errNotEnforced says that the target's API server does not enforce the
// policies (yet).
var errNotEnforced = errors.New("not enforced")

// ensureAdmission installs the policies on the target cluster c (admin
// config cfg) and returns once its API server enforces them, so that no
// provider holds a token there before. It does so at most every resync
// interval per cluster. A cluster that cannot be given them
// (no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies, or the
// policies are not enforced within TargetTimeout) gets no grant.
func (r *Reconciler) ensureAdmission(ctx context.Context, cluster string, c client.Client, cfg *rest.Config) error {
	last := r.admission.get(cluster)
	now := r.now()
	if !last.at.IsZero() && now.Sub(last.at) < r.resync {
		// Between full rounds, two reads show that the policy that
		// refuses is still the one seen enforced.
		current, err := validatingVersions(ctx, c)
		if err != nil {
			return err
		}
		if current == last.validating {
			return nil
		}
	}
	objs := []client.Object{isolationPolicy(r.accessNamespace), isolationBinding()}
	mutating, err := serves(c, admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicy"))
	if err != nil {
		return err
	}
	if mutating {
		objs = append(objs, namespaceOwnerPolicy(r.accessNamespace), namespaceOwnerBinding())
	}
	objs = append(objs, probeRole(), probeBinding(r.accessNamespace))
	var versions []string
	for _, obj := range objs {
		if err := provider.Apply(ctx, c, obj); err != nil {
			return err
		}
		versions = append(versions, obj.GetResourceVersion())
	}
	seen := admissionSeen{at: now, versions: strings.Join(versions, "/"), validating: strings.Join(versions[:2], "/")}
	if seen.versions != last.versions {
		if err := probeAdmission(ctx, cfg, r.accessNamespace, mutating); err != nil {
			return err
		}
	}
	r.admission.set(cluster, seen)
	return nil
}

// validatingVersions returns the resource versions of isolationPolicy and
// its binding on the cluster of c, empty for one that does not exist.
func validatingVersions(ctx context.Context, c client.Client) (string, error) {
	versions := make([]string, 0, 2)
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}} {
		if err := c.Get(ctx, client.ObjectKey{Name: IsolationPolicyName}, obj); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("get %T %s: %w", obj, IsolationPolicyName, err)
		}
		versions = append(versions, obj.GetResourceVersion())
	}
	return strings.Join(versions, "/"), nil
}

// serves reports whether the cluster of c serves gvk.
func serves(c client.Client, gvk schema.GroupVersionKind) (bool, error) {
	_, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case apimeta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("discover %s: %w", gvk, err)
}

// probeAdmission waits until the API server of cfg enforces the policies:
// an API server loads a new policy a moment after it is written. It sends
// dry-run requests as a made-up provider (which may create namespaces by
// probeRole, so that RBAC lets them through to admission): creating the
// access namespace must be refused by isolationPolicy and, with mutating,
// a new namespace must come back labelled by namespaceOwnerPolicy. Dry-run
// requests pass admission and write nothing. The probe holds no more than
// that: kcp refuses to impersonate system:masters.
func probeAdmission(ctx context.Context, cfg *rest.Config, accessNamespace string, mutating bool) error {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = TargetTimeout
	// The probe polls; client-go's default limit would hold it back.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: probeUser(accessNamespace),
		Groups:   []string{"system:authenticated"},
	}
	c, err := newTargetClient(cfg)
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, TargetTimeout, true, func(ctx context.Context) (bool, error) {
		last = probeOnce(ctx, c, accessNamespace, mutating)
		if errors.Is(last, errNotEnforced) {
			return false, nil
		}
		return last == nil, last
	})
	if err != nil {
		if last != nil && !errors.Is(err, last) {
			err = fmt.Errorf("%w: %w", err, last)
		}
		return fmt.Errorf("check that the API server enforces the admission policies %s and %s: %w", IsolationPolicyName, NamespaceOwnerPolicyName, err)
	}
	return nil
}

func probeOnce(ctx context.Context, c client.Client, accessNamespace string, mutating bool) error {
	dry := client.DryRunAll
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: accessNamespace}}, dry)
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), IsolationPolicyName):
	case err == nil, apierrors.IsAlreadyExists(err):
		return fmt.Errorf("creating namespace %s as a provider was not refused: %w", accessNamespace, errNotEnforced)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("creating namespace %s as a provider: %w: %w", accessNamespace, err, errNotEnforced)
	default:
		return fmt.Errorf("create namespace %s as a provider (dry run): %w", accessNamespace, err)
	}
	if !mutating {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "marketplane-probe-"}}
	err = c.Create(ctx, ns, dry)
	switch {
	case err == nil && ns.Labels[NamespaceOwnerLabel] == probeProvider:
		return nil
	case err == nil:
		return fmt.Errorf("a namespace a provider creates is not labelled %s: %w", NamespaceOwnerLabel, errNotEnforced)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("a namespace a provider creates is not labelled %s: %w: %w", NamespaceOwnerLabel, err, errNotEnforced)
	}
	return fmt.Errorf("create a namespace as a provider (dry run): %w", err)
}
