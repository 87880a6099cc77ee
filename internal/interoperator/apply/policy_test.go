package apply

import (
	"context"
	"errors"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCheckRBAC(t *testing.T) {
	clusterRole := func(name string, labels map[string]string) *unstructured.Unstructured {
		o := obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", name)
		o.SetLabels(labels)
		return o
	}
	binding := func(role string) *unstructured.Unstructured {
		o := obj("rbac.authorization.k8s.io/v1", "RoleBinding", "tenant", "b")
		o.Object["roleRef"] = map[string]any{"kind": "ClusterRole", "name": role}
		return o
	}
	grantRoles := Policy{ClusterScopedKinds: []schema.GroupKind{{Group: rbacGroup, Kind: "ClusterRole"}}}
	tests := map[string]struct {
		reason string
		obj    *unstructured.Unstructured
		policy Policy
		rule   string
	}{
		"EditAllowed":         {reason: "edit is one of the bindable roles.", obj: binding("edit")},
		"ClusterAdminRefused": {reason: "cluster-admin is never bindable by default.", obj: binding("cluster-admin"), rule: RuleBindableClusterRoles},
		"GrantedRole":         {reason: "A granted ClusterRole is bindable.", obj: binding("reader"), policy: Policy{ClusterRoles: []string{"reader"}}},
		"WildcardGrant":       {reason: "* grants every ClusterRole.", obj: binding("cluster-admin"), policy: Policy{ClusterRoles: []string{"*"}}},
		"AggregationRefused":  {reason: "A granted ClusterRole may not aggregate into edit.", obj: clusterRole("x", map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}), policy: grantRoles, rule: RuleNoRoleAggregation},
		"ReplaceAdminRefused": {reason: "A granted ClusterRole may not replace admin.", obj: clusterRole("admin", nil), policy: grantRoles, rule: RuleNoRoleAggregation},
		"PlainClusterRoleOK":  {reason: "A granted ClusterRole of its own is fine.", obj: clusterRole("mine", nil), policy: grantRoles},
		"AggregationWithStar": {reason: "clusterRoles * allows aggregation.", obj: clusterRole("x", map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}), policy: Policy{ClusterRoles: []string{"*"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkRBAC(tc.obj, tc.obj.GroupVersionKind().GroupKind(), tc.policy)
			var refused *RefusedError
			switch {
			case tc.rule == "" && err != nil:
				t.Errorf("%s\nerr = %v, want none", tc.reason, err)
			case tc.rule != "" && (!errors.As(err, &refused) || refused.Rule != tc.rule):
				t.Errorf("%s\nerr = %v, want rule %s", tc.reason, err, tc.rule)
			}
		})
	}
}

func TestCheckSizeAndScope(t *testing.T) {
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, apimeta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, apimeta.RESTScopeRoot)
	a := New(fake.NewClientBuilder().WithRESTMapper(mapper).Build())
	p := Policy{Owner: Owner{InstanceUID: "i"}, DefaultNamespace: "tenant", MaxObjectBytes: 100}

	big := obj("v1", "ConfigMap", "tenant", "big")
	big.Object["data"] = map[string]any{"x": string(make([]byte, 200))}
	var tooLarge *TooLargeError
	if err := a.Check(context.Background(), []*unstructured.Unstructured{big}, p); !errors.As(err, &tooLarge) {
		t.Errorf("an object above MaxObjectBytes: err = %v, want a *TooLargeError", err)
	}
	missing := obj("v1", "ConfigMap", "nowhere", "cm")
	var refused *RefusedError
	if err := a.Check(context.Background(), []*unstructured.Unstructured{missing}, p); !errors.As(err, &refused) || refused.Rule != RuleOwnNamespaces {
		t.Errorf("an object in a namespace that neither exists nor is rendered: err = %v, want rule %s", err, RuleOwnNamespaces)
	}
	if err := a.Check(context.Background(), []*unstructured.Unstructured{obj("v1", "Namespace", "", "new"), obj("v1", "ConfigMap", "new", "cm")}, p); err != nil {
		t.Errorf("an object in a Namespace the render creates: err = %v, want none", err)
	}
}
