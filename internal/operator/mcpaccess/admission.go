package mcpaccess

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// Names of the admission policy that protects the requests in MCP
// namespaces, and of its parameter.
const (
	// RequestsPolicyName names the ValidatingAdmissionPolicy and its
	// binding.
	RequestsPolicyName = "marketplane-provider-mcp-requests"
	// RequestOwnersConfigMapName names the ConfigMap in the operator's
	// namespace that maps the namespace of every ServiceProvider to its
	// name: the value its requests in MCP namespaces must carry in the
	// label openmcp.cloud/managed-by. The policy reads it as its parameter.
	RequestOwnersConfigMapName = "marketplane-mcp-request-owners"
)

// providerUser matches the ServiceAccounts of providers: those of the
// provider namespaces the operator creates (sp-, cp-, ps-; as the CRD
// groups policy of internal/operator/provider). A ClusterProvider's or
// PlatformService's is not in the parameter and may write nothing here.
const providerUser = `request.userInfo.username.startsWith('system:serviceaccount:') && ` +
	`request.userInfo.username.split(':')[2].matches('^(sp|cp|ps)-')`

// ownerRule: every version of the object the request touches (the new one
// on create and update, the old one on update and delete) is labelled with
// the provider of the ServiceAccount.
var ownerRule = fmt.Sprintf(`variables.owner != '' && variables.objects.all(o, has(o.metadata.labels) && '%[1]s' in o.metadata.labels && o.metadata.labels['%[1]s'] == variables.owner)`,
	providerv1alpha1.ManagedByLabel)

// nameRule: no provider request takes a name of the MCP's own requests
// (internal/operator/mcp): the ClusterRequest named like the MCP and the
// AccessRequests "<mcp>.<token>". The MCP controller would otherwise adopt
// a provider's request as its own.
const nameRule = `variables.mcpName == '' || variables.objects.all(o, o.metadata.name != variables.mcpName && !o.metadata.name.startsWith(variables.mcpName + '.'))`

// requestsPolicy is the ValidatingAdmissionPolicy, served by the platform
// API server, that lets a provider's ServiceAccounts create, update or
// delete ClusterRequests and AccessRequests in MCP namespaces only when the
// object (old and new) carries their provider's name in the label
// openmcp.cloud/managed-by. RBAC cannot say this: the providers' Role in
// an MCP namespace covers every request there, the MCP's own and the other
// providers' included.
func requestsPolicy(labels map[string]string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: RequestsPolicyName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: corev2alpha1.MCPNameLabel, Operator: metav1.LabelSelectorOpExists,
				}}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{clustersv1alpha1.GroupName},
							APIVersions: []string{"*"},
							Resources:   []string{"clusterrequests", "accessrequests"},
						},
					},
				}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "provider-service-account", Expression: providerUser}},
			Variables: []admissionregistrationv1.Variable{
				{Name: "providerNamespace", Expression: `request.userInfo.username.split(':')[2]`},
				{Name: "owner", Expression: `has(params.data) && variables.providerNamespace in params.data ? params.data[variables.providerNamespace] : ''`},
				{Name: "objects", Expression: `[object, oldObject].filter(o, o != null)`},
				{Name: "mcpName", Expression: fmt.Sprintf(`has(namespaceObject.metadata.labels) && '%[1]s' in namespaceObject.metadata.labels ? namespaceObject.metadata.labels['%[1]s'] : ''`,
					corev2alpha1.MCPNameLabel)},
			},
			Validations: []admissionregistrationv1.Validation{
				{
					Expression: ownerRule,
					MessageExpression: fmt.Sprintf(`'a provider may create, change or delete ClusterRequests and AccessRequests in an MCP namespace only when their label %s names it' + `+
						`(variables.owner != '' ? ' ("' + variables.owner + '")' : '; this ServiceAccount belongs to no ServiceProvider')`, providerv1alpha1.ManagedByLabel),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: nameRule,
					MessageExpression: `'the name ' + variables.mcpName + ' and names starting with "' + variables.mcpName + '." are reserved for the requests of ManagedControlPlane ' + ` +
						`variables.mcpName + ' in this namespace'`,
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
}

// requestsBinding binds the policy to the owners ConfigMap in the
// operator's namespace. Without the ConfigMap every provider's write of a
// request in an MCP namespace is denied: failing closed.
func requestsBinding(labels map[string]string, operatorNamespace string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: RequestsPolicyName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: RequestsPolicyName,
			ParamRef: &admissionregistrationv1.ParamRef{
				Name:                    RequestOwnersConfigMapName,
				Namespace:               operatorNamespace,
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction),
			},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}
