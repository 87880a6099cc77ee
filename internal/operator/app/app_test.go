package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"time"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/api/install"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/pkg/testenv"
)

const (
	operatorNamespace = "marketplane-system"
	probeImage        = "example.org/probe-provider:v1"
)

// TestOperator runs the real operator binary's init and run (in-process,
// through the cobra command) with the process deployer against three real
// API servers, and drives a provider and a ManagedControlPlane through their
// whole lives.
func TestOperator(t *testing.T) {
	// The platform cluster needs kube-controller-manager: deleting a
	// provider deletes its namespace.
	platform := testenv.Start(t, testenv.WithName("platform"), testenv.WithCRDs(), testenv.WithControllerManager())
	envs := testenv.StartMany(t, []string{"onboarding", "mcp"}, testenv.WithCRDs())
	onboarding, mcpCluster := envs["onboarding"], envs["mcp"]
	envs["platform"] = platform
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	platformKubeconfig, err := platform.KubeconfigPath()
	must(t, err)
	onboardingKubeconfig, err := onboarding.KubeconfigPath()
	must(t, err)
	contractFlags := []string{"--environment=test", "--provider-name=marketplane", "--verbosity=DEBUG", "--kubeconfig=" + platformKubeconfig}

	// init installs the CRDs: the API servers started without any.
	must(t, execute(ctx, append([]string{"init", "--onboarding-kubeconfig=" + onboardingKubeconfig}, contractFlags...)...))
	for _, c := range []struct {
		env  *testenv.Cluster
		name string
	}{
		{platform, "serviceproviders.openmcp.cloud"},
		{platform, "accessrequests.clusters.openmcp.cloud"},
		{onboarding, "managedcontrolplanes.core.openmcp.cloud"},
		{onboarding, "controlplanes.core.open-control-plane.io"},
	} {
		must(t, c.env.Client.Get(ctx, client.ObjectKey{Name: c.name}, &apiextensionsv1.CustomResourceDefinition{}))
	}

	// Register the onboarding and MCP clusters (static cluster provider).
	must(t, platform.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}))
	register(t, platform, "onboarding", onboarding, clustersv1alpha1.PurposeOnboarding, clustersv1alpha1.TenancyShared)
	register(t, platform, "mcp-1", mcpCluster, clustersv1alpha1.PurposeMCP, clustersv1alpha1.TenancyExclusive)

	// The provider binary: the process deployer's contract probe.
	dir := t.TempDir()
	testenv.BuildBinaries(t, dir, "github.com/marketplane/marketplane/internal/operator/deploy/process/internal/contractprobe")
	probe := filepath.Join(dir, "contractprobe")
	images := filepath.Join(dir, "images.yaml")
	must(t, os.WriteFile(images, fmt.Appendf(nil, "images:\n- image: %q\n  binary: %q\n", probeImage, probe), 0o600))
	reports := filepath.Join(dir, "reports")
	must(t, os.Mkdir(reports, 0o755))

	runDone := make(chan struct{})
	var runErr error
	go func() {
		defer close(runDone)
		runErr = execute(ctx, append([]string{"run", "--deployer=process", "--process-images=" + images,
			"--state-dir=" + filepath.Join(dir, "state"), "--namespace=" + operatorNamespace,
			"--metrics-bind-address=0", "--health-probe-bind-address=0", "--onboarding-retry-interval=200ms"}, contractFlags...)...)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-runDone:
			if runErr != nil {
				t.Errorf("operator run: %v", runErr)
			}
		case <-time.After(30 * time.Second):
			t.Error("operator run did not stop within 30s of cancellation")
		}
	})
	// A wait fails at once, not at its timeout, when the operator has exited.
	running := func() error {
		select {
		case <-runDone:
			if runErr == nil {
				return errors.New("operator exited")
			}
			return fmt.Errorf("operator exited: %w", runErr)
		default:
			return nil
		}
	}

	t.Run("ServiceProvider runs through init and run", func(t *testing.T) {
		sp := &providerv1alpha1.ServiceProvider{
			ObjectMeta: metav1.ObjectMeta{Name: "probe"},
			Spec: providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{
				Image:   probeImage,
				Env:     []providerv1alpha1.EnvVar{{Name: "PROBE_OUT", Value: reports}},
				Metrics: &providerv1alpha1.MetricsConfiguration{Disabled: true},
			}},
		}
		must(t, platform.Client.Create(ctx, sp))
		waitFor(t, "ServiceProvider Ready", 90*time.Second, func(ctx context.Context) (bool, error) {
			if err := running(); err != nil {
				return false, err
			}
			if err := platform.Client.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
				return false, err
			}
			return apimeta.IsStatusConditionTrue(sp.Status.Conditions, string(providerv1alpha1.ConditionReady)), nil
		}, func() string { return fmt.Sprintf("status: %+v", sp.Status) })

		want := []string{"--environment=test", "--provider-name=probe", "--verbosity=INFO"}
		for _, sub := range []string{"init", "run"} {
			r := probeReport(t, reports, sub)
			if len(r.Args) <= len(want) || r.Args[0] != sub || !slices.Equal(r.Args[1:len(want)+1], want) {
				t.Errorf("args = %v, want %s followed by %v", r.Args, sub, want)
			}
			if got := r.Env["POD_NAMESPACE"]; got != "sp-probe" {
				t.Errorf("%s POD_NAMESPACE = %q, want sp-probe", sub, got)
			}
			wantUser := "system:serviceaccount:sp-probe:sp-probe"
			if sub == "init" {
				wantUser += "-init"
			}
			if r.Username != wantUser {
				t.Errorf("%s authenticated as %q (error %q), want %q", sub, r.Username, r.AuthError, wantUser)
			}
		}
	})

	t.Run("ManagedControlPlane gets a cluster and exactly the requested access", func(t *testing.T) {
		must(t, onboarding.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}))
		m := &corev2alpha1.ManagedControlPlane{
			ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "tenant-a"},
			Spec: corev2alpha1.ManagedControlPlaneSpec{IAM: corev2alpha1.IAMConfig{Tokens: []corev2alpha1.TokenConfig{{
				Name: "ci",
				TokenConfig: clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{
					Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
				}}},
			}}}},
		}
		must(t, onboarding.Client.Create(ctx, m))
		waitFor(t, "ManagedControlPlane Ready", 60*time.Second, func(ctx context.Context) (bool, error) {
			if err := running(); err != nil {
				return false, err
			}
			if err := onboarding.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				return false, err
			}
			return apimeta.IsStatusConditionTrue(m.Status.Conditions, common.ConditionTypeReady), nil
		}, func() string { return fmt.Sprintf("conditions: %+v", m.Status.Conditions) })

		ref, ok := m.Status.Access["ci"]
		if !ok {
			t.Fatalf("status.access has no entry ci: %v", m.Status.Access)
		}
		secret := &corev1.Secret{}
		must(t, onboarding.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, secret))
		tenant := clientFromKubeconfig(t, secret.Data["kubeconfig"])
		if err := tenant.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); err != nil {
			t.Errorf("tenant token: list configmaps: %v", err)
		}
		err := tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}})
		if !apierrors.IsForbidden(err) {
			t.Errorf("tenant token: create configmap: want Forbidden, got %v", err)
		}
		if err := tenant.List(ctx, &corev1.SecretList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
			t.Errorf("tenant token: list secrets: want Forbidden, got %v", err)
		}

		must(t, onboarding.Client.Delete(ctx, m))
		waitFor(t, "ManagedControlPlane gone", 60*time.Second, func(ctx context.Context) (bool, error) {
			err := onboarding.Client.Get(ctx, client.ObjectKeyFromObject(m), m)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}, func() string { return fmt.Sprintf("conditions: %+v", m.Status.Conditions) })
		// Revoked: the MCP cluster no longer has the access service account.
		sas := &corev1.ServiceAccountList{}
		must(t, mcpCluster.Client.List(ctx, sas, client.InNamespace("marketplane-access")))
		if len(sas.Items) != 0 {
			t.Errorf("service accounts left on the MCP cluster after deletion: %d", len(sas.Items))
		}
	})

	t.Run("no component gets cluster-admin", func(t *testing.T) {
		for name, env := range envs {
			crbs := &rbacv1.ClusterRoleBindingList{}
			must(t, env.Client.List(ctx, crbs))
			for _, b := range crbs.Items {
				if b.RoleRef.Name == "cluster-admin" && !strings.HasPrefix(b.Name, "cluster-admin") {
					t.Errorf("%s: ClusterRoleBinding %s binds cluster-admin to %v", name, b.Name, b.Subjects)
				}
			}
			rbs := &rbacv1.RoleBindingList{}
			must(t, env.Client.List(ctx, rbs))
			for _, b := range rbs.Items {
				if b.RoleRef.Name == "cluster-admin" {
					t.Errorf("%s: RoleBinding %s/%s binds cluster-admin", name, b.Namespace, b.Name)
				}
			}
		}
	})

	t.Run("deleting the ServiceProvider stops it and removes its namespace objects", func(t *testing.T) {
		sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
		must(t, platform.Client.Delete(ctx, sp))
		waitFor(t, "ServiceProvider gone", 60*time.Second, func(ctx context.Context) (bool, error) {
			err := platform.Client.Get(ctx, client.ObjectKeyFromObject(sp), sp)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}, func() string { return fmt.Sprintf("status: %+v", sp.Status) })
		sas := &corev1.ServiceAccountList{}
		must(t, platform.Client.List(ctx, sas, client.InNamespace("sp-probe")))
		if len(sas.Items) != 0 {
			t.Errorf("service accounts left in sp-probe: %d", len(sas.Items))
		}
	})
}

// TestInitFailsWhenItCannotInstall shows that init exits with an error (so
// the init Job fails visibly) when the platform cluster cannot be reached.
func TestInitFailsWhenItCannotInstall(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := execute(ctx, "init", "--environment=test", "--provider-name=marketplane", "--kubeconfig="+kubeconfig)
	if err == nil || !strings.Contains(err.Error(), "install platform CRDs") {
		t.Fatalf("init against an unreachable cluster: want an error about installing CRDs, got %v", err)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	cases := map[string]struct {
		args    []string
		wantErr string
	}{
		"LoudVerbosity": {args: []string{"run", "--environment=test", "--provider-name=m", "--verbosity=LOUD"}, wantErr: "--verbosity"},
		"NoEnvironment": {args: []string{"init", "--provider-name=m"}, wantErr: "--environment"},
		"ProfileWithoutPurpose": {args: []string{"run", "--environment=test", "--provider-name=m", "--cluster-profile=kcp"},
			wantErr: `--cluster-profile "kcp": want purpose=ClusterProfile`},
		"ProfileEmptyName": {args: []string{"run", "--environment=test", "--provider-name=m", "--cluster-profile=mcp="},
			wantErr: `--cluster-profile "mcp="`},
		"ProfileBadName": {args: []string{"run", "--environment=test", "--provider-name=m", "--cluster-profile=mcp=Not_A_Name"},
			wantErr: "is not a ClusterProfile name"},
		"ProfileTwice": {args: []string{"run", "--environment=test", "--provider-name=m", "--cluster-profile=mcp=kcp", "--cluster-profile=mcp=other"},
			wantErr: `purpose "mcp" already has ClusterProfile "kcp"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := execute(t.Context(), tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("execute(%v): want an error containing %q, got %v", tc.args, tc.wantErr, err)
			}
		})
	}
}

func execute(ctx context.Context, args ...string) error {
	cmd := NewCommand()
	cmd.SetArgs(args)
	cmd.SetOut(os.Stderr)
	cmd.SetErr(os.Stderr)
	return cmd.ExecuteContext(ctx)
}

func register(t *testing.T, platform *testenv.Cluster, name string, target *testenv.Cluster, purpose string, tenancy clustersv1alpha1.Tenancy) {
	t.Helper()
	ctx := t.Context()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: operatorNamespace},
		Data:       map[string][]byte{"kubeconfig": target.Kubeconfig},
	}
	must(t, platform.Client.Create(ctx, secret))
	must(t, platform.Client.Create(ctx, &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: operatorNamespace,
			Annotations: map[string]string{clusters.KubeconfigSecretAnnotation: secret.Name}},
		Spec: clustersv1alpha1.ClusterSpec{Profile: "static", Purposes: []string{purpose}, Tenancy: tenancy},
	}))
}

type report struct {
	Args      []string          `json:"args"`
	Env       map[string]string `json:"env"`
	Username  string            `json:"username"`
	AuthError string            `json:"authError"`
}

// probeReport returns the first report the probe wrote for subcommand.
func probeReport(t *testing.T, dir, subcommand string) report {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	must(t, err)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		must(t, err)
		var r struct {
			report
			Subcommand string `json:"subcommand"`
		}
		must(t, json.Unmarshal(raw, &r))
		if r.Subcommand == subcommand {
			return r.report
		}
	}
	t.Fatalf("no %s report in %s (files: %v)", subcommand, dir, files)
	return report{}
}

func clientFromKubeconfig(t *testing.T, kubeconfig []byte) client.Client {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	must(t, err)
	c, err := client.New(cfg, client.Options{})
	must(t, err)
	return c
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func(context.Context) (bool, error), detail func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, cond)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("%s: %v; %s", what, err, detail())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestParseClusterProfiles(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		want   map[string]string
	}{
		"None":    {reason: "no flag, no profiles", want: map[string]string{}},
		"One":     {reason: "purpose=profile", args: []string{"mcp=kcp"}, want: map[string]string{"mcp": "kcp"}},
		"Several": {reason: "one per purpose, spaces trimmed", args: []string{"mcp=kcp", " workload = big-clusters "}, want: map[string]string{"mcp": "kcp", "workload": "big-clusters"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseClusterProfiles(tc.args)
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestProvisionerOf: with --cluster-profile, a request of a profile's
// purpose goes to the profile provisioner (here it names the missing
// ClusterProfile) and any other to --cluster-provisioner; without it, the
// socket provisioner alone.
func TestProvisionerOf(t *testing.T) {
	socket := clusters.ProvisionerFns{ProvisionFn: func(context.Context, *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
		return &clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "from-socket"}}, nil
	}}
	scheme, err := install.NewScheme()
	must(t, err)
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	request := func(purpose string) *clustersv1alpha1.ClusterRequest {
		return &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "uid-1"},
			Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: purpose}}
	}

	p := provisionerOf(c, Config{Namespace: operatorNamespace, Provisioner: socket, Profiles: map[string]string{"mcp": "kcp"}})
	if _, err := p.Provision(t.Context(), request("mcp")); err == nil || !strings.Contains(err.Error(), `ClusterProfile "kcp"`) {
		t.Errorf("mcp: %v, want the profile provisioner's error naming ClusterProfile kcp", err)
	}
	if cl, err := p.Provision(t.Context(), request("workload")); err != nil || cl == nil || cl.Name != "from-socket" {
		t.Errorf("workload: %v, %v; want the socket provisioner's Cluster", cl, err)
	}
	if p := provisionerOf(c, Config{Provisioner: socket}); p == nil {
		t.Error("without profiles: no provisioner, want the socket one")
	} else if cl, err := p.Provision(t.Context(), request("mcp")); err != nil || cl == nil || cl.Name != "from-socket" {
		t.Errorf("without profiles, mcp: %v, %v; want the socket provisioner's Cluster", cl, err)
	}
	if p := provisionerOf(c, Config{}); p != nil {
		t.Errorf("neither flag: provisioner %v, want none", p)
	}
}
