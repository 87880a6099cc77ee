package charts_test

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/marketplane/marketplane/charts"
)

// consoleRender is what the chart renders for the console of one value set.
type consoleRender struct {
	objs           []*unstructured.Unstructured
	dep            *appsv1.Deployment
	container      corev1.Container
	serviceAccount *corev1.ServiceAccount
	service        *corev1.Service
}

// renderConsole renders values for release and picks the console's
// Deployment, container, ServiceAccount and Service.
func renderConsole(t *testing.T, release string, values map[string]any) *consoleRender {
	t.Helper()
	objs, err := charts.Render(charts.WithExampleRegistry(values), charts.WithReleaseName(release), charts.WithNamespace(release+"-system"))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	r := &consoleRender{objs: objs, dep: &appsv1.Deployment{}, serviceAccount: &corev1.ServiceAccount{}, service: &corev1.Service{}}
	fromUnstructured(t, mustFind(t, objs, "Deployment", release+"-console"), r.dep)
	fromUnstructured(t, mustFind(t, objs, "ServiceAccount", release+"-console"), r.serviceAccount)
	fromUnstructured(t, mustFind(t, objs, "Service", release+"-console"), r.service)
	if cs := r.dep.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != "console" {
		t.Fatalf("console pod containers %v, want one named console", cs)
	}
	r.container = r.dep.Spec.Template.Spec.Containers[0]
	return r
}

// fileSource returns the volume that provides the file at p in the console
// container, and the key of the Secret or ConfigMap the file holds; it
// fails unless the mount is read-only.
func (r *consoleRender) fileSource(t *testing.T, p string) (corev1.Volume, string) {
	t.Helper()
	for _, m := range r.container.VolumeMounts {
		rel, ok := strings.CutPrefix(p, m.MountPath+"/")
		if !ok {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("the mount %s of %s is not read-only", m.MountPath, p)
		}
		for _, v := range r.dep.Spec.Template.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			var items []corev1.KeyToPath
			switch {
			case v.Secret != nil:
				items = v.Secret.Items
			case v.ConfigMap != nil:
				items = v.ConfigMap.Items
			default:
				t.Fatalf("volume %s of %s is neither a Secret nor a ConfigMap", v.Name, p)
			}
			if len(items) == 0 {
				return v, rel // every key, as a file of its name
			}
			for _, it := range items {
				if path.Clean(it.Path) == rel {
					return v, it.Key
				}
			}
			t.Fatalf("volume %s has no item at %s (items %v)", v.Name, rel, items)
		}
		t.Fatalf("mount %s names no volume of the pod", m.Name)
	}
	t.Fatalf("no mount of the console container holds %s (mounts %v)", p, r.container.VolumeMounts)
	return corev1.Volume{}, ""
}

// flag returns the value of --name in the console's args, or "" and false.
func (r *consoleRender) flag(name string) (string, bool) {
	for _, a := range r.container.Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name {
			return "", true
		}
	}
	return "", false
}

// checkNoIdentity checks that the console has no identity: no token in its
// pods, a ServiceAccount that mounts none, and no role, binding or token
// Secret anywhere in the render that concerns it.
func (r *consoleRender) checkNoIdentity(t *testing.T) {
	t.Helper()
	pod := r.dep.Spec.Template.Spec
	if a := pod.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("console pod automountServiceAccountToken = %s, want false", boolField(a))
	}
	if pod.ServiceAccountName != r.serviceAccount.Name {
		t.Errorf("console pod runs as %q, want its own ServiceAccount %q", pod.ServiceAccountName, r.serviceAccount.Name)
	}
	if a := r.serviceAccount.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("console ServiceAccount automountServiceAccountToken = %s, want false", boolField(a))
	}
	for _, v := range pod.Volumes {
		if v.Projected != nil {
			t.Errorf("console pod has the projected volume %s (a token?)", v.Name)
		}
	}
	for _, o := range r.objs {
		console := o.GetLabels()["app.kubernetes.io/component"] == "console"
		switch o.GetKind() {
		case "Role", "ClusterRole":
			if console {
				t.Errorf("%s %s is the console's", o.GetKind(), o.GetName())
			}
		case "RoleBinding", "ClusterRoleBinding":
			b := &rbacv1.RoleBinding{}
			fromUnstructured(t, o, b)
			for _, s := range b.Subjects {
				if console || (s.Kind == rbacv1.ServiceAccountKind && s.Name == r.serviceAccount.Name) {
					t.Errorf("%s %s binds the console (%s %s)", o.GetKind(), o.GetName(), s.Kind, s.Name)
				}
			}
		case "Secret":
			if typ, _, _ := unstructured.NestedString(o.Object, "type"); typ == string(corev1.SecretTypeServiceAccountToken) || console {
				t.Errorf("Secret %s (type %q) is rendered for the console", o.GetName(), typ)
			}
		}
	}
}

// boolField shows an optional boolean: unset (the API's default, true for
// automountServiceAccountToken), true or false.
func boolField(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}

// checkService checks the console's ClusterIP Service: port to the
// container's http port, selecting exactly the console's pods.
func (r *consoleRender) checkService(t *testing.T, port int32) {
	t.Helper()
	s := r.service.Spec
	if s.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("console Service type %q, want ClusterIP", s.Type)
	}
	if len(s.Ports) != 1 || s.Ports[0].Port != port || s.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("console Service ports %+v, want %d to the port named http", s.Ports, port)
	}
	if len(r.container.Ports) != 1 || r.container.Ports[0].Name != "http" || r.container.Ports[0].ContainerPort != port {
		t.Errorf("console container ports %+v, want http on %d", r.container.Ports, port)
	}
	labels := r.dep.Spec.Template.Labels
	for k, v := range s.Selector {
		if labels[k] != v {
			t.Errorf("console Service selects %s=%s, the pod has %q", k, v, labels[k])
		}
	}
	if s.Selector["app.kubernetes.io/component"] != "console" {
		t.Errorf("console Service selector %v does not select the console component", s.Selector)
	}
	if listen, _ := r.flag("--listen"); listen != ":"+strconv.Itoa(int(port)) {
		t.Errorf("console --listen=%q, want :%d (every interface of the pod)", listen, port)
	}
}

// checkProbes checks that both probes GET /login, which answers without a
// session, on the http port with the scheme the console serves.
func (r *consoleRender) checkProbes(t *testing.T, scheme corev1.URIScheme) {
	t.Helper()
	for name, p := range map[string]*corev1.Probe{"liveness": r.container.LivenessProbe, "readiness": r.container.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("console has no HTTP %s probe", name)
			continue
		}
		if g := p.HTTPGet; g.Path != "/login" || g.Port != intstr.FromString("http") || g.Scheme != scheme {
			t.Errorf("console %s probe GET %s %s on %s, want %s /login on http", name, g.Scheme, g.Path, g.Port.String(), scheme)
		}
	}
}

// TestConsoleDefaults: the console is on by default, runs `marketplane
// console` from the marketplane image against the install cluster's API
// server (the kubernetes Service, trusted by the CA of the ConfigMap
// kube-root-ca.crt), has no identity and no RBAC, is served by a ClusterIP
// Service, and its port is open in the chart's NetworkPolicies.
func TestConsoleDefaults(t *testing.T) {
	r := renderConsole(t, "marketplane", nil)
	if got, want := r.container.Image, charts.ExampleImageRegistry+"/marketplane/marketplane:0.1.0"; got != want {
		t.Errorf("console image %q, want %q", got, want)
	}
	want := []string{"console", "--listen=:8080", "--server=https://kubernetes.default.svc", "--certificate-authority=/etc/marketplane/onboarding-ca/ca.crt", "--verbosity=INFO"}
	if !slices.Equal(r.container.Args, want) {
		t.Errorf("console args %q, want %q", r.container.Args, want)
	}
	if ca, ok := r.flag("--certificate-authority"); ok {
		v, key := r.fileSource(t, ca)
		if v.ConfigMap == nil || v.ConfigMap.Name != "kube-root-ca.crt" || key != "ca.crt" {
			t.Errorf("--certificate-authority %s comes from volume %+v key %q, want the ConfigMap kube-root-ca.crt, key ca.crt", ca, v.VolumeSource, key)
		}
	}
	for _, v := range r.dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			t.Errorf("console mounts the Secret %s by default", v.Secret.SecretName)
		}
	}
	r.checkNoIdentity(t)
	r.checkService(t, 8080)
	r.checkProbes(t, corev1.URISchemeHTTP)
	if r.service.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		t.Errorf("one replica, yet the Service has sessionAffinity ClientIP")
	}
	if got := *r.dep.Spec.Replicas; got != 1 {
		t.Errorf("console replicas %d, want 1", got)
	}

	np := &networkingv1.NetworkPolicy{}
	fromUnstructured(t, mustFind(t, r.objs, "NetworkPolicy", "marketplane-console"), np)
	if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "console" {
		t.Errorf("console NetworkPolicy selects %v", np.Spec.PodSelector.MatchLabels)
	}
	if in := np.Spec.Ingress; len(in) != 1 || len(in[0].Ports) != 1 || in[0].Ports[0].Port.IntValue() != 8080 || len(in[0].From) != 0 {
		t.Errorf("console NetworkPolicy ingress %+v, want port 8080 from everyone", in)
	}
}

// TestConsoleOnboardingKubeconfig: with onboarding.kubeconfigSecret the
// console reads that kubeconfig (mounted read-only from the Secret) instead
// of the install cluster's address and CA.
func TestConsoleOnboardingKubeconfig(t *testing.T) {
	r := renderConsole(t, "onb", map[string]any{"onboarding": map[string]any{"kubeconfigSecret": map[string]any{"name": "onboarding-kubeconfig", "key": "config"}}})
	want := []string{"console", "--listen=:8080", "--kubeconfig=/etc/marketplane/onboarding/config", "--verbosity=INFO"}
	if !slices.Equal(r.container.Args, want) {
		t.Errorf("console args %q, want %q", r.container.Args, want)
	}
	if kc, ok := r.flag("--kubeconfig"); ok {
		v, key := r.fileSource(t, kc)
		if v.Secret == nil || v.Secret.SecretName != "onboarding-kubeconfig" || key != "config" {
			t.Errorf("--kubeconfig %s comes from volume %+v key %q, want the Secret onboarding-kubeconfig, key config", kc, v.VolumeSource, key)
		}
	}
	for _, v := range r.dep.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			t.Errorf("console mounts the ConfigMap %s although the onboarding kubeconfig says whom to trust", v.ConfigMap.Name)
		}
	}
	r.checkNoIdentity(t)
	r.checkService(t, 8080)
}

// TestConsoleTLS: console.tls.secretName serves HTTPS with the Secret's
// certificate (probes too), console.secureCookies passes --secure-cookies,
// a port and replicas of one's own, and the result is accepted by an API
// server.
func TestConsoleTLS(t *testing.T) {
	values := unique("console-tls", map[string]any{
		"global":  map[string]any{"verbosity": "DEBUG"},
		"console": map[string]any{"tls": map[string]any{"secretName": "console-serving"}, "secureCookies": true, "port": 8443, "replicas": 2},
	})
	r := renderConsole(t, "console-tls", values)
	want := []string{"console", "--listen=:8443", "--server=https://kubernetes.default.svc", "--certificate-authority=/etc/marketplane/onboarding-ca/ca.crt",
		"--tls-cert-file=/etc/marketplane/tls/tls.crt", "--tls-key-file=/etc/marketplane/tls/tls.key", "--secure-cookies", "--verbosity=DEBUG"}
	if !slices.Equal(r.container.Args, want) {
		t.Errorf("console args %q, want %q", r.container.Args, want)
	}
	for _, f := range []struct{ flag, key string }{{"--tls-cert-file", "tls.crt"}, {"--tls-key-file", "tls.key"}} {
		p, _ := r.flag(f.flag)
		v, key := r.fileSource(t, p)
		if v.Secret == nil || v.Secret.SecretName != "console-serving" || key != f.key {
			t.Errorf("%s %s comes from volume %+v key %q, want the Secret console-serving, key %s", f.flag, p, v.VolumeSource, key, f.key)
		}
	}
	r.checkNoIdentity(t)
	r.checkService(t, 8443)
	r.checkProbes(t, corev1.URISchemeHTTPS)
	if r.service.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		t.Errorf("two replicas keep sessions in memory, yet the Service's sessionAffinity is %q", r.service.Spec.SessionAffinity)
	}
	apply(t, "console-tls-system", r.objs)
}

// TestConsoleDisabled: console.enabled=false renders nothing of the
// console, its NetworkPolicy included.
func TestConsoleDisabled(t *testing.T) {
	objs, err := charts.Render(charts.WithExampleRegistry(map[string]any{"console": map[string]any{"enabled": false}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "console" || strings.HasSuffix(o.GetName(), "-console") {
			t.Errorf("console.enabled=false renders %s %s", o.GetKind(), o.GetName())
		}
	}
	mustFind(t, objs, "Deployment", "marketplane-broker")
}
