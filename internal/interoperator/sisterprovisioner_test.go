package interoperator_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/replicate"
	"github.com/marketplane/marketplane/internal/interoperator/sisters"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestSisterProvisioner shows that a sister SFCluster in provisioning mode
// replicate gets its provisioner from the master, with no manual step: the
// CRDs, a Deployment of the configured image running the inter-operator
// with the contract flags, and a ServiceAccount with RBAC that is all it
// needs. The test plays the sister's kubelet: it runs the inter-operator
// binary with the Deployment's arguments and environment as that
// ServiceAccount, which then provisions and binds a replicated instance.
// The image follows the master's configuration; deleting the SFCluster
// removes everything installed once the replicas are gone.
func TestSisterProvisioner(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	ctx := context.Background()
	// A sister without the Service Fabrik CRDs; its controller manager
	// deletes namespaces (no Deployment controller: the test plays it).
	sister := testenv.Start(t, testenv.WithName("sister"), testenv.WithControllerManager())

	const image = "registry.example.org/marketplane-interoperator:v1"
	e := newEnv(t, envOptions{noCluster: true, configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.DefaultCluster = "sister"
		s.SisterProvisioner = &interoperatorv1alpha1.SisterProvisioner{Image: image, ImagePullSecrets: []string{"pull"}}
	}})
	must(t, platform.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "pull"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}))
	e.registerCluster(t, "sister", sister.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Spec.ProvisioningMode = resourcev1alpha1.ProvisioningReplicate
	})
	ns := interoperatorv1alpha1.DefaultSisterProvisionerNamespace

	// The provisioner is installed.
	dep := &appsv1.Deployment{}
	waitFor(t, "the provisioner's Deployment on the sister", func() bool {
		return sister.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sisters.Name}, dep) == nil
	})
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	must(t, platform.Client.Get(ctx, client.ObjectKey{Name: e.name}, cfg))
	if dep.Labels[replicate.LabelMaster] != string(cfg.UID) {
		t.Errorf("Deployment labels %v; want the master's identity %s", dep.Labels, cfg.UID)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 || pod.Containers[0].Image != image || pod.ServiceAccountName != sisters.Name {
		t.Fatalf("Deployment: containers %+v, service account %q; want one container of %s as %s", pod.Containers, pod.ServiceAccountName, image, sisters.Name)
	}
	args := pod.Containers[0].Args
	for _, want := range []string{"run", "--provider-name", sisters.ProviderName, "--onboarding-is-platform"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %q", args, want)
		}
	}
	if len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "pull" {
		t.Errorf("image pull Secrets %v, want the copy of pull", pod.ImagePullSecrets)
	}
	pull := &corev1.Secret{}
	must(t, sister.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pull"}, pull))
	if pull.Type != corev1.SecretTypeDockerConfigJson {
		t.Errorf("the pull Secret's copy has type %s", pull.Type)
	}
	for _, crd := range []string{"sfserviceinstances.osb.servicefabrik.io", "sfclusters.resource.servicefabrik.io", "providerconfigs.interoperator.services.openmcp.cloud"} {
		must(t, sister.Client.Get(ctx, client.ObjectKey{Name: crd}, &apiextensionsv1.CustomResourceDefinition{}))
	}
	checkLeastPrivilege(t, sister, ns)
	waitFor(t, "ProvisionerReady=False/Installing on the master's SFCluster", func() bool {
		c := provisionerCondition(t, e)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == sisters.ReasonInstalling
	})

	// The kubelet stand-in: the binary with the Deployment's arguments and
	// downward-API environment, as the ServiceAccount (a token instead of
	// the in-cluster files; metrics off so that parallel tests do not
	// share a port).
	stop, output := runAsPod(t, sister, dep)
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	must(t, sister.Client.Status().Update(ctx, dep))
	waitFor(t, "ProvisionerReady=True on the master's SFCluster", func() bool {
		c := provisionerCondition(t, e)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == sisters.ReasonAvailable
	})

	// An instance and a binding succeed on the sister.
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", replicatePlan)
	inst := e.createInstance(t, "inst", "svc", "plan", nil)
	got := e.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
	if got.Status.Description != "provisioned on 1" {
		t.Errorf("description %q, want the sister's (rendered on cluster 1)", got.Status.Description)
	}
	e.createBinding(t, "b", inst)
	b := e.waitBinding(t, "b", osbv1alpha1.StateSucceeded)
	if b.Status.Response == nil || b.Status.Response.SecretRef != "sf-b" {
		t.Errorf("binding response %+v, want secretRef sf-b", b.Status.Response)
	}

	// Upgrade: the sister follows the master's image.
	const image2 = "registry.example.org/marketplane-interoperator:v2"
	edit(t, platform.Client, cfg, func() { cfg.Spec.SisterProvisioner.Image = image2 })
	waitFor(t, "the Deployment to run the new image", func() bool {
		return sister.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sisters.Name}, dep) == nil && dep.Spec.Template.Spec.Containers[0].Image == image2
	})
	dep.Status.ObservedGeneration = dep.Generation
	must(t, sister.Client.Status().Update(ctx, dep))

	// A second master registers the same sister: it finds the first's
	// provisioner, says so, and at its offboarding deletes none of it.
	e2 := newEnv(t, envOptions{noCluster: true, configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		s.SisterProvisioner = &interoperatorv1alpha1.SisterProvisioner{Image: "registry.example.org/other:v1"}
	}})
	e2.registerCluster(t, "sister", sister.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Spec.ProvisioningMode = resourcev1alpha1.ProvisioningReplicate
	})
	waitFor(t, "ProvisionerReady=False/ProvisionerConflict on the second master's SFCluster", func() bool {
		c := provisionerCondition(t, e2)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == sisters.ReasonConflict && strings.Contains(c.Message, string(cfg.UID))
	})
	deleteAndWait(t, platform.Client, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e2.catalog, Name: "sister"}})
	must(t, sister.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sisters.Name}, dep))
	if dep.Spec.Template.Spec.Containers[0].Image != image2 || dep.DeletionTimestamp != nil || dep.Labels[replicate.LabelMaster] != string(cfg.UID) {
		t.Errorf("the first master's Deployment changed with the second master: image %s, deleted %v, labels %v",
			dep.Spec.Template.Spec.Containers[0].Image, dep.DeletionTimestamp, dep.Labels)
	}
	if c := provisionerCondition(t, e); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the first master's ProvisionerReady %+v, want True", c)
	}

	// A master without spec.sisterProvisioner installs nothing and says
	// why.
	e3 := newEnv(t, envOptions{noCluster: true})
	e3.registerCluster(t, "sister", sister.Kubeconfig, func(c *resourcev1alpha1.SFCluster) {
		c.Spec.ProvisioningMode = resourcev1alpha1.ProvisioningReplicate
	})
	waitFor(t, "ProvisionerReady=False/NotConfigured on the third master's SFCluster", func() bool {
		c := provisionerCondition(t, e3)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == sisters.ReasonNotConfigured
	})
	unconfigured := &resourcev1alpha1.SFCluster{}
	must(t, platform.Client.Get(ctx, client.ObjectKey{Namespace: e3.catalog, Name: "sister"}, unconfigured))
	if slices.Contains(unconfigured.Finalizers, sisters.Finalizer) {
		t.Errorf("an SFCluster without a provisioner to remove got the finalizer %s", sisters.Finalizer)
	}

	// Offboarding: the instance first, then the SFCluster; the provisioner
	// goes with it.
	deleteAndWait(t, onboarding.Client, &osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "b"}})
	deleteAndWait(t, onboarding.Client, inst)
	deleteAndWait(t, platform.Client, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "sister"}})
	stop()
	// Least privilege, proven: the inter-operator worked with the RBAC
	// the controller created, and was refused nothing.
	if out := output(); strings.Contains(out, "forbidden") {
		t.Errorf("the sister's inter-operator was refused requests:\n%s", grepLines(out, "forbidden"))
	}
	for _, obj := range []client.Object{
		&resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: resourcev1alpha1.PrimaryClusterID}},
		&interoperatorv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: sisters.ProviderName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: sisters.KubeconfigSecretName}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sisters.Name}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sisters.Name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: sisters.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: sisters.Name}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sisters.Name}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
	} {
		waitGone(t, sister.Client, obj)
	}
}

// checkLeastPrivilege checks that nothing on c binds the provisioner's
// ServiceAccount to more than its own roles, and that those name their
// verbs and resources: no cluster-admin, no wildcard.
func checkLeastPrivilege(t *testing.T, c *testenv.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	crbs := &rbacv1.ClusterRoleBindingList{}
	must(t, c.Client.List(ctx, crbs))
	for _, b := range crbs.Items {
		if b.RoleRef.Name == "cluster-admin" && slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Namespace == ns }) {
			t.Errorf("ClusterRoleBinding %s binds cluster-admin to %v", b.Name, b.Subjects)
		}
	}
	roles := &rbacv1.ClusterRole{}
	must(t, c.Client.Get(ctx, client.ObjectKey{Name: sisters.Name}, roles))
	rules := slices.Clone(roles.Rules)
	list := &rbacv1.RoleList{}
	must(t, c.Client.List(ctx, list, client.MatchingLabels{sisters.LabelProvisioner: "true"}))
	for _, r := range list.Items {
		rules = append(rules, r.Rules...)
	}
	for _, r := range rules {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
			t.Errorf("the provisioner's rule %+v has a wildcard", r)
		}
		if slices.Contains(r.Resources, "secrets") && slices.Contains(r.Verbs, "get") && len(r.ResourceNames) == 0 {
			t.Errorf("the provisioner may read every Secret: %+v", r)
		}
	}
}

// provisionerCondition returns the ProvisionerReady condition of the
// env's SFCluster "sister".
func provisionerCondition(t *testing.T, e *env) *metav1.Condition {
	t.Helper()
	sfc := &resourcev1alpha1.SFCluster{}
	must(t, platform.Client.Get(context.Background(), client.ObjectKey{Namespace: e.catalog, Name: "sister"}, sfc))
	return apimeta.FindStatusCondition(sfc.Status.Conditions, sisters.ConditionProvisionerReady)
}

// runAsPod runs the inter-operator binary as a pod of dep on c would run:
// its arguments, the downward API's POD_* variables, and a token of its
// ServiceAccount for the cluster. It returns a function that stops the
// process, also called when the test ends, and one that returns its
// output.
func runAsPod(t *testing.T, c *testenv.Cluster, dep *appsv1.Deployment) (stop func(), output func() string) {
	t.Helper()
	ctx := context.Background()
	bin, err := interoperatorBinary()
	must(t, err)
	pod := dep.Spec.Template.Spec
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: pod.ServiceAccountName}}
	tr := &authenticationv1.TokenRequest{}
	must(t, c.Client.SubResource("token").Create(ctx, sa, tr))
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sister"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["sa"] = &clientcmdapi.Context{Cluster: "sister", AuthInfo: "sa"}
	kc.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), "in-cluster.kubeconfig")
	must(t, clientcmd.WriteToFile(*kc, path))

	args := append(slices.Clone(pod.Containers[0].Args), "--kubeconfig", path, "--metrics-bind-address", "0", "--verbosity", "DEBUG")
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for _, v := range pod.Containers[0].Env {
		if v.ValueFrom == nil || v.ValueFrom.FieldRef == nil {
			continue
		}
		value := map[string]string{
			"metadata.name": dep.Name + "-0", "metadata.namespace": dep.Namespace, "status.podIP": "127.0.0.1",
			"spec.serviceAccountName": pod.ServiceAccountName,
		}[v.ValueFrom.FieldRef.FieldPath]
		cmd.Env = append(cmd.Env, v.Name+"="+value)
	}
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stopProcess := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the sister's inter-operator exited with %v\n%s", err, out.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("the sister's inter-operator did not stop on SIGTERM\n%s", out.String())
		}
	}
	t.Cleanup(func() {
		stopProcess()
		if t.Failed() {
			t.Logf("the sister's inter-operator:\n%s", lastLines(out.String(), 200))
		}
	})
	return stopProcess, out.String
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
