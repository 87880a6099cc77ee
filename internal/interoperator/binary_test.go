package interoperator_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
)

// TestProvider checks what the binary installs and may do.
func TestProvider(t *testing.T) {
	p, err := interoperator.Provider()
	must(t, err)
	byName := map[string]string{}
	for _, crd := range p.CRDs {
		byName[crd.Name] = crd.Labels[crds.ClusterLabel]
	}
	want := map[string]string{
		"sfserviceinstances.osb.servicefabrik.io":              crds.ClusterOnboarding,
		"sfservicebindings.osb.servicefabrik.io":               crds.ClusterOnboarding,
		"sfservices.osb.servicefabrik.io":                      crds.ClusterPlatform,
		"sfplans.osb.servicefabrik.io":                         crds.ClusterPlatform,
		"sfclusters.resource.servicefabrik.io":                 crds.ClusterPlatform,
		"providerconfigs.interoperator.services.openmcp.cloud": crds.ClusterPlatform,
	}
	if len(byName) != len(want) {
		t.Errorf("CRDs = %v, want %v", byName, want)
	}
	for name, cluster := range want {
		if byName[name] != cluster {
			t.Errorf("CRD %s: cluster %q, want %q", name, byName[name], cluster)
		}
	}
	if len(p.ServiceKinds) != 0 {
		t.Errorf("service kinds %v: instances are not named after ManagedControlPlanes, want none", p.ServiceKinds)
	}
	for _, r := range p.RunPermissions.Rules {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") {
			t.Errorf("run permissions grant %v on %v; want named verbs and resources", r.Verbs, r.Resources)
		}
	}
}

// TestBinary runs marketplane-interoperator init and run, as the provider
// operator would, against the test clusters, and provisions an instance
// with it. It runs first and alone (the process serves every namespace of
// the onboarding cluster), and stops the process before it returns.
func TestBinary(t *testing.T) {
	needsClusters(t)
	ctx := context.Background()
	bin, err := interoperatorBinary()
	must(t, err)
	platformKubeconfig, err := platform.KubeconfigPath()
	must(t, err)
	onboardingKubeconfig, err := onboarding.KubeconfigPath()
	must(t, err)

	const provider = "bin-io"
	catalogNS, tenantNS := "catalog-bin", "tenant-bin"
	for c, ns := range map[client.Client]string{platform.Client: catalogNS, onboarding.Client: tenantNS} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	args := []string{"--provider-name", provider, "--environment", "test", "--kubeconfig", platformKubeconfig, "--onboarding-kubeconfig", onboardingKubeconfig}
	command := func(sub string, extra ...string) *exec.Cmd {
		cmd := exec.Command(bin, append(append([]string{sub}, args...), extra...)...)
		cmd.Env = append(os.Environ(), "POD_NAMESPACE="+catalogNS, "POD_NAME=interoperator-0")
		return cmd
	}
	if out, err := command("init").CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}

	must(t, platform.Client.Create(ctx, &interoperatorv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: provider},
		Spec: interoperatorv1alpha1.ProviderConfigSpec{CatalogNamespace: catalogNS}}))
	must(t, platform.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: catalogNS, Name: "kubeconfig"},
		Data: map[string][]byte{resourcev1alpha1.KubeconfigSecretKey: target.Kubeconfig}}))
	must(t, platform.Client.Create(ctx, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: catalogNS, Name: "target"},
		Spec: resourcev1alpha1.SFClusterSpec{SecretRef: "kubeconfig"}}))
	e := &env{name: provider, catalog: catalogNS, ns: tenantNS}
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{gotemplate(osbv1alpha1.ActionProvision, configMaps("from-binary"))})

	run := command("run", "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	var out strings.Builder
	run.Stdout, run.Stderr = &out, &out
	must(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = run.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("run exited with %v\n%s", err, out.String())
			}
		case <-time.After(30 * time.Second):
			_ = run.Process.Kill()
			t.Errorf("run did not stop on SIGTERM\n%s", out.String())
		}
	}
	t.Cleanup(stop)

	e.createInstance(t, "inst", "svc", "plan", nil)
	inst := e.waitInstance(t, "inst", osbv1alpha1.StateSucceeded)
	if got := targetConfigMaps(t, tenantNS, "inst"); !slices.Equal(got, []string{"from-binary"}) {
		t.Errorf("ConfigMaps on the target = %v, want from-binary", got)
	}
	// Deprovision while the process runs, so that nothing is left for the
	// other tests' inter-operators.
	deleteAndWait(t, onboarding.Client, inst)
	stop()
	if t.Failed() {
		t.Logf("run output:\n%s", out.String())
	}
}
