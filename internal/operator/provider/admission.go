package provider

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// Names of the admission policy that limits which CRDs providers may write
// on the platform cluster, and of its parameter.
const (
	// CRDGroupsPolicyName names the ValidatingAdmissionPolicy and its
	// binding.
	CRDGroupsPolicyName = "marketplane-provider-crd-groups"
	// GroupOwnersConfigMapName names the ConfigMap in the operator's
	// namespace that maps every owned API group to the namespace of its
	// owner (empty for a group in conflict). The policy reads it as its
	// parameter.
	GroupOwnersConfigMapName = "marketplane-api-group-owners"
)

// providerUser matches the ServiceAccounts of providers: those of the
// provider namespaces the operator creates (docs/operator.md, "Provider
// deployment"). Nobody else can have a namespace of that name on the
// platform cluster without the platform operator's help, and matching more
// would only restrict more.
const providerUser = `request.userInfo.username.startsWith('system:serviceaccount:') && ` +
	`request.userInfo.username.split(':')[2].matches('^(sp|cp|ps)-')`

// crdGroupRule is policy.MayOwn in CEL: a group in the owners ConfigMap
// belongs to the namespace it maps to; any other group may be claimed unless
// it is reserved (policy.ReservedCEL, built from policy.Reserved's lists).
var crdGroupRule = `variables.groups.all(g, (has(params.data) && g in params.data) ? params.data[g] == variables.providerNamespace : !` +
	policy.ReservedCEL("g") + `)`

// crdGroupsPolicy is the ValidatingAdmissionPolicy, served by the API
// server itself, that lets a provider's ServiceAccounts create, update or
// delete only CRDs of API groups the provider owns or could still claim.
// The RBAC of the init role cannot say this: it can name CRDs, but a
// provider's CRDs are not known before its init runs.
func crdGroupsPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: CRDGroupsPolicyName, Labels: sharedLabels()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{apiextensionsv1.GroupName},
							APIVersions: []string{"*"},
							Resources:   []string{"customresourcedefinitions"},
						},
					},
				}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "provider-service-account", Expression: providerUser}},
			Variables: []admissionregistrationv1.Variable{
				{Name: "providerNamespace", Expression: `request.userInfo.username.split(':')[2]`},
				{Name: "groups", Expression: `[object, oldObject].filter(o, o != null).map(o, o.spec.group)`},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: crdGroupRule,
				MessageExpression: `'a provider may write only CRDs of API groups it owns or can still claim; API group "' + ` +
					`variables.groups.join('", "') + '" is reserved or owned by another provider (see spec.accessPolicy.apiGroups)'`,
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
}

// crdGroupsBinding binds the policy to the owners ConfigMap in the
// operator's namespace. Without the ConfigMap every provider's CRD write is
// denied: failing closed.
func (r *Reconciler[T]) crdGroupsBinding() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: CRDGroupsPolicyName, Labels: sharedLabels()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: CRDGroupsPolicyName,
			ParamRef: &admissionregistrationv1.ParamRef{
				Name:                    GroupOwnersConfigMapName,
				Namespace:               r.opts.operatorNamespace,
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction),
			},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}

// ensureCRDGroupsPolicy applies the policy, its binding and the owners
// ConfigMap computed from own. Every reconciler of every kind applies the
// same objects from the same (eventually consistent) ownership, and each
// change of ownership reconciles every provider, so the last write is
// current.
func (r *Reconciler[T]) ensureCRDGroupsPolicy(ctx context.Context, own *policy.Ownership) error {
	data := map[string]string{}
	prefixes := map[string]string{
		ServiceProviders().Name: ServiceProviders().Prefix,
		ClusterProviders().Name: ClusterProviders().Prefix,
		PlatformServices().Name: PlatformServices().Prefix,
	}
	for group, owner := range own.Owners() {
		if group == "" {
			// Not a key a ConfigMap can hold, and no CRD has this group.
			continue
		}
		data[group] = ""
		if owner.Kind != "" {
			data[group] = newNames(prefixes[owner.Kind], owner.Name).Namespace
		}
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: GroupOwnersConfigMapName, Namespace: r.opts.operatorNamespace, Labels: sharedLabels()},
		Data:       data,
	}
	if err := apply(ctx, r.client, cm); err != nil {
		return err
	}
	if err := apply(ctx, r.client, crdGroupsPolicy()); err != nil {
		return err
	}
	return apply(ctx, r.client, r.crdGroupsBinding())
}

// sharedLabels label what the operator creates for all providers at once.
func sharedLabels() map[string]string {
	return map[string]string{providerv1alpha1.ManagedByLabel: ManagedByValue}
}
