package charts_test

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/charts"
	"github.com/marketplane/marketplane/pkg/manifests"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestPodSecurity checks every pod of every value set: the pod and container
// securityContext of the chart's security posture, resources set, no host
// access, and images with the configured registry and tag.
func TestPodSecurity(t *testing.T) {
	for _, vs := range valueSets() {
		t.Run(vs.name, func(t *testing.T) {
			objs := vs.render(t)
			registry, tag := expectedImage(vs.values)
			deployments := 0
			for _, o := range objs {
				if o.GetKind() != "Deployment" {
					continue
				}
				deployments++
				dep := &appsv1.Deployment{}
				fromUnstructured(t, o, dep)
				checkPod(t, dep.Name, dep.Spec.Template.Spec, registry, tag)
			}
			if deployments == 0 {
				t.Fatal("no Deployment rendered")
			}
			for _, o := range objs {
				if o.GetKind() == "ServiceProvider" {
					image, _, _ := unstructured.NestedString(o.Object, "spec", "image")
					checkImage(t, "ServiceProvider "+o.GetName(), image, registry, tag)
				}
			}
		})
	}
}

// expectedImage returns the registry and tag the value set asks for: the
// operator's own tag wins for the operator, so the tag checked is the
// global one (or the appVersion) and the operator's when it has one.
func expectedImage(values map[string]any) (registry string, tags []string) {
	tags = []string{"0.1.0"}
	registry = charts.ExampleImageRegistry
	if g, ok := values["global"].(map[string]any); ok {
		if r, _ := g["imageRegistry"].(string); r != "" {
			registry = r
		}
		if tag, _ := g["imageTag"].(string); tag != "" {
			tags = []string{tag}
		}
	}
	if op, ok := values["operator"].(map[string]any); ok {
		if img, ok := op["image"].(map[string]any); ok {
			if tag, _ := img["tag"].(string); tag != "" {
				tags = append(tags, tag)
			}
		}
	}
	return registry, tags
}

func checkImage(t *testing.T, who, image, registry string, tags []string) {
	t.Helper()
	if !strings.HasPrefix(image, registry+"/") {
		t.Errorf("%s: image %q is not from registry %q", who, image, registry)
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || !slices.Contains(tags, image[i+1:]) {
		t.Errorf("%s: image %q has not the configured tag (one of %v)", who, image, tags)
	}
}

func checkPod(t *testing.T, name string, pod corev1.PodSpec, registry string, tags []string) {
	t.Helper()
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("%s: uses the host's network, PID or IPC namespace", name)
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("%s: volume %s is a hostPath", name, v.Name)
		}
	}
	psc := pod.SecurityContext
	switch {
	case psc == nil:
		t.Errorf("%s: no pod securityContext", name)
	case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot, psc.RunAsUser == nil || *psc.RunAsUser != 65532,
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: pod securityContext %+v lacks runAsNonRoot, runAsUser 65532 or seccomp RuntimeDefault", name, *psc)
	}
	containers := append(slices.Clone(pod.InitContainers), pod.Containers...)
	for _, c := range containers {
		who := name + "/" + c.Name
		checkImage(t, who, c.Image, registry, tags)
		checkContainerSecurity(t, who, c.SecurityContext)
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				t.Errorf("%s: no %s request", who, r)
			}
			if _, ok := c.Resources.Limits[r]; !ok {
				t.Errorf("%s: no %s limit", who, r)
			}
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				t.Errorf("%s: port %s uses hostPort %d", who, p.Name, p.HostPort)
			}
		}
	}
}

func checkContainerSecurity(t *testing.T, who string, sc *corev1.SecurityContext) {
	t.Helper()
	if sc == nil {
		t.Errorf("%s: no securityContext", who)
		return
	}
	var problems []string
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		problems = append(problems, "runAsNonRoot is not true")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		problems = append(problems, "runAsUser is not 65532")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		problems = append(problems, "readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		problems = append(problems, "allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		problems = append(problems, "privileged")
	}
	if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		problems = append(problems, "capabilities are not exactly drop ALL")
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		problems = append(problems, "seccompProfile is not RuntimeDefault")
	}
	if len(problems) > 0 {
		t.Errorf("%s: securityContext: %s", who, strings.Join(problems, "; "))
	}
}

// TestRBACLeastPrivilege checks every Role and ClusterRole of every value
// set, and of the plain manifests under config/: no `*` in verbs, resources,
// API groups or non-resource URLs; escalate and bind only where the operator
// must write providers' roles; and no binding of cluster-admin (or of any
// built-in role) to anything.
func TestRBACLeastPrivilege(t *testing.T) {
	sets := map[string][]*unstructured.Unstructured{}
	for _, vs := range valueSets() {
		sets[vs.name] = vs.render(t)
	}
	data, err := os.ReadFile("../config/marketplane.yaml")
	if err != nil {
		t.Fatalf("read the plain manifests: %v", err)
	}
	if sets["config/marketplane.yaml"], err = manifests.Decode(data); err != nil {
		t.Fatalf("decode config/marketplane.yaml: %v", err)
	}
	for name, objs := range sets {
		t.Run(name, func(t *testing.T) {
			roles := 0
			for _, o := range objs {
				switch o.GetKind() {
				case "ClusterRole", "Role":
					roles++
					role := &rbacv1.ClusterRole{}
					fromUnstructured(t, o, role)
					if role.AggregationRule != nil {
						t.Errorf("%s %s aggregates other roles", o.GetKind(), o.GetName())
					}
					for i, r := range role.Rules {
						checkRule(t, fmt.Sprintf("%s %s rule %d", o.GetKind(), o.GetName(), i), o.GetName(), r)
					}
				case "ClusterRoleBinding", "RoleBinding":
					b := &rbacv1.RoleBinding{}
					fromUnstructured(t, o, b)
					if b.RoleRef.Name == "cluster-admin" || b.RoleRef.Name == "admin" || b.RoleRef.Name == "edit" || strings.HasPrefix(b.RoleRef.Name, "system:") {
						t.Errorf("%s %s binds the built-in role %s", o.GetKind(), o.GetName(), b.RoleRef.Name)
					}
					for _, s := range b.Subjects {
						if s.Kind != rbacv1.ServiceAccountKind {
							t.Errorf("%s %s binds a %s %s; the chart binds ServiceAccounts only", o.GetKind(), o.GetName(), s.Kind, s.Name)
						}
					}
				}
			}
			if roles == 0 {
				t.Fatal("no roles rendered")
			}
		})
	}
}

func checkRule(t *testing.T, where, role string, r rbacv1.PolicyRule) {
	t.Helper()
	for field, values := range map[string][]string{"verbs": r.Verbs, "resources": r.Resources, "apiGroups": r.APIGroups, "nonResourceURLs": r.NonResourceURLs} {
		for _, v := range values {
			if strings.Contains(v, "*") {
				t.Errorf("%s: %s contains the wildcard %q", where, field, v)
			}
		}
	}
	if len(r.Verbs) == 0 {
		t.Errorf("%s: no verbs", where)
	}
	for _, v := range []string{"escalate", "bind", "impersonate"} {
		if !slices.Contains(r.Verbs, v) {
			continue
		}
		// Only the operator's ClusterRole, only on roles and clusterroles:
		// it writes providers' roles whose rules it does not hold.
		if v == "impersonate" || !strings.HasSuffix(role, "-operator") || !slices.Equal(r.APIGroups, []string{rbacv1.GroupName}) ||
			(!slices.Equal(r.Resources, []string{"clusterroles"}) && !slices.Equal(r.Resources, []string{"roles"})) {
			t.Errorf("%s: grants %s on %v %v", where, v, r.APIGroups, r.Resources)
		}
	}
}

func fromUnstructured(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true); err != nil {
		t.Fatalf("%s %s does not decode as %T: %v", o.GetKind(), o.GetName(), into, err)
	}
}
