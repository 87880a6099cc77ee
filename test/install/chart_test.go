package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// operatorChart is what the chart installs for one component (the
// operator, or the broker: componentObjects): its CRDs, its Deployment, and
// its ServiceAccount with the roles and bindings that name it.
type operatorChart struct {
	// Component is the value of the Deployment's label
	// app.kubernetes.io/component ("operator", "broker").
	Component           string
	CRDs                []*unstructured.Unstructured
	Deployment          *appsv1.Deployment
	ServiceAccount      *corev1.ServiceAccount
	ClusterRoles        []*rbacv1.ClusterRole
	Roles               []*rbacv1.Role
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
	RoleBindings        []*rbacv1.RoleBinding
}

// fromUnstructured converts u into out, a typed object.
func fromUnstructured(t *testing.T, u *unstructured.Unstructured, out any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("decode %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
}

// operatorObjects picks the operator's objects out of the rendered chart
// (componentObjects for component operator).
func operatorObjects(t *testing.T, objs []*unstructured.Unstructured) *operatorChart {
	t.Helper()
	return componentObjects(t, objs, "operator")
}

// componentObjects picks a component's objects out of the rendered chart:
// the Deployment labelled app.kubernetes.io/component=component, the
// ServiceAccount it runs as, every binding with that ServiceAccount as a
// subject, and the roles those bindings refer to. Other components' RBAC
// is left out: it is not this component's to use.
func componentObjects(t *testing.T, objs []*unstructured.Unstructured, component string) *operatorChart {
	t.Helper()
	oc := &operatorChart{Component: component}
	var deployments []string
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			oc.CRDs = append(oc.CRDs, u)
			continue
		}
		if u.GetKind() != "Deployment" {
			continue
		}
		dep := &appsv1.Deployment{}
		fromUnstructured(t, u, dep)
		deployments = append(deployments, dep.Name)
		if dep.Labels["app.kubernetes.io/component"] == component {
			if oc.Deployment != nil {
				t.Fatalf("two %s Deployments in the chart: %s and %s", component, oc.Deployment.Name, dep.Name)
			}
			oc.Deployment = dep
		}
	}
	if oc.Deployment == nil {
		t.Fatalf("no Deployment with label app.kubernetes.io/component=%s among %q", component, deployments)
	}
	ns, sa := oc.Deployment.Namespace, oc.Deployment.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		t.Fatalf("the %s Deployment %s names no ServiceAccount", component, oc.Deployment.Name)
	}
	isComponent := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == ns
		})
	}
	clusterRoles, roles := map[string]bool{}, map[string]bool{}
	for _, u := range objs {
		switch u.GetKind() {
		case "ServiceAccount":
			if u.GetName() == sa && u.GetNamespace() == ns {
				oc.ServiceAccount = &corev1.ServiceAccount{}
				fromUnstructured(t, u, oc.ServiceAccount)
			}
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			fromUnstructured(t, u, b)
			if isComponent(b.Subjects) {
				oc.ClusterRoleBindings = append(oc.ClusterRoleBindings, b)
				clusterRoles[b.RoleRef.Name] = true
			}
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			fromUnstructured(t, u, b)
			if isComponent(b.Subjects) {
				oc.RoleBindings = append(oc.RoleBindings, b)
				if b.RoleRef.Kind == "ClusterRole" {
					clusterRoles[b.RoleRef.Name] = true
				} else {
					roles[b.Namespace+"/"+b.RoleRef.Name] = true
				}
			}
		}
	}
	if oc.ServiceAccount == nil {
		t.Fatalf("the chart renders no ServiceAccount %s/%s for the %s Deployment", ns, sa, component)
	}
	for _, u := range objs {
		switch {
		case u.GetKind() == "ClusterRole" && clusterRoles[u.GetName()]:
			r := &rbacv1.ClusterRole{}
			fromUnstructured(t, u, r)
			oc.ClusterRoles = append(oc.ClusterRoles, r)
			delete(clusterRoles, r.Name)
		case u.GetKind() == "Role" && roles[u.GetNamespace()+"/"+u.GetName()]:
			r := &rbacv1.Role{}
			fromUnstructured(t, u, r)
			oc.Roles = append(oc.Roles, r)
			delete(roles, r.Namespace+"/"+r.Name)
		}
	}
	// A binding to a role the chart does not render grants nothing the
	// chart controls (or something built in, such as cluster-admin, which
	// checkNoWildcards reports).
	for name := range clusterRoles {
		t.Logf("the %s is bound to ClusterRole %s, which the chart does not render", component, name)
	}
	for name := range roles {
		t.Errorf("the %s is bound to Role %s, which the chart does not render", component, name)
	}
	return oc
}

// container returns the component Deployment's container (or init
// container, init true) named name.
func (oc *operatorChart) container(t *testing.T, name string, init bool) corev1.Container {
	t.Helper()
	list := oc.Deployment.Spec.Template.Spec.Containers
	if init {
		list = oc.Deployment.Spec.Template.Spec.InitContainers
	}
	for _, c := range list {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the %s Deployment has no container %q (init %v)", oc.Component, name, init)
	return corev1.Container{}
}

// rbacObjects are the component's ServiceAccount, roles and bindings, in the
// order to create them.
func (oc *operatorChart) rbacObjects() []client.Object {
	objs := []client.Object{oc.ServiceAccount}
	for _, r := range oc.ClusterRoles {
		objs = append(objs, r)
	}
	for _, r := range oc.Roles {
		objs = append(objs, r)
	}
	for _, b := range oc.ClusterRoleBindings {
		objs = append(objs, b)
	}
	for _, b := range oc.RoleBindings {
		objs = append(objs, b)
	}
	return objs
}

// install creates the chart's CRDs and the component's RBAC in c, as `helm
// install` would (crds/ first), and waits until the CRDs are served.
func (oc *operatorChart) install(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	ctx := t.Context()
	for _, u := range oc.CRDs {
		if err := c.Client.Create(ctx, u.DeepCopy()); err != nil {
			t.Fatalf("create CRD %s: %v", u.GetName(), err)
		}
	}
	namespaces := map[string]bool{}
	for _, obj := range oc.rbacObjects() {
		if ns := obj.GetNamespace(); ns != "" && !namespaces[ns] {
			namespaces[ns] = true
			err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create namespace %s: %v", ns, err)
			}
		}
		if err := c.Client.Create(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
			t.Fatalf("create %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	for _, u := range oc.CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		eventually(t, "CRD "+u.GetName()+" established", func(ctx context.Context) (bool, string, error) {
			if err := c.Client.Get(ctx, client.ObjectKey{Name: u.GetName()}, crd); err != nil {
				return false, err.Error(), nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("conditions %+v", crd.Status.Conditions), nil
		})
	}
}

// eventually polls cond every 200 ms until it holds and fails the test with
// what and cond's last reason when it does not within waitTimeout.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		ok, why, err := cond(ctx)
		last = why
		return ok, err
	})
	if err != nil {
		t.Fatalf("waiting for %s (%s): %v; last: %s", what, waitTimeout, err, last)
	}
}

// argsWithPorts returns args with the port of each listen-address flag in
// flags replaced: a free one for the metrics flag, 0 for the others, so
// that the process listens where nothing else does (the chart's fixed
// ports are the pod's own, not the test machine's).
func argsWithPorts(t *testing.T, args []string, metricsFlag string, flags ...string) (out []string, metricsPort string) {
	t.Helper()
	for _, a := range args {
		name, value, ok := strings.Cut(a, "=")
		if ok && (name == metricsFlag || slices.Contains(flags, name)) {
			host, _, found := strings.Cut(value, ":")
			if !found {
				t.Fatalf("flag %s: want host:port, got %q", name, value)
			}
			port := "0"
			if name == metricsFlag {
				metricsPort = freePort(t)
				port = metricsPort
			}
			a = name + "=" + host + ":" + port
		}
		out = append(out, a)
	}
	return out, metricsPort
}
