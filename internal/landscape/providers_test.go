package landscape_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/cli"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/stack"
	"github.com/marketplane/marketplane/internal/landscape/validationtarget"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/testenv"
	"github.com/marketplane/marketplane/pkg/validation"
)

// fakeProviderEnv, set in a ServiceProvider's spec.env, makes this test
// binary act as a provider (see fakeProvider): the process deployer runs
// it when the provider's image is mapped to os.Executable().
const fakeProviderEnv = "LANDSCAPE_TEST_PROVIDER_LISTEN"

// fakeProvider is a provider that listens on an address, as a provider's
// metrics or health-probe server does: init succeeds, run listens on addr
// until SIGTERM, or exits with the listen error (say, "bind: address
// already in use") as controller-runtime's manager does.
func fakeProvider(addr string, args []string) int {
	if len(args) > 0 && args[0] == "init" {
		fmt.Println("fake provider: init done")
		return 0
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: problem running manager: %v\n", err)
		return 1
	}
	defer ln.Close()
	fmt.Printf("fake provider: serving on %s\n", ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	return 0
}

// TestTwoLandscapes starts two landscapes at once on this machine, each in
// its own state directory, with `landscape up` as a user does, the real
// sample provider's binary mapped to an image name of a registry
// (--image-map). The first runs it from a --manifest file together with
// its ProviderConfig (whose CRD the provider's init installs) and must
// become Ready with the provider Ready; the second starts without it, and
// the validation flow then deploys, uses and removes the provider there
// (validationtarget.ExistingLandscape). Both run on ports of their own; then both
// go down cleanly.
func TestTwoLandscapes(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	// Built here, not taken from bin/: `make test` builds only the API
	// servers there, and a user's provider is a binary of its own anyway.
	bin := t.TempDir()
	testenv.BuildBinaries(t, bin, "github.com/marketplane/marketplane/providers/sample/cmd/sample")
	sample := filepath.Join(bin, "sample")
	const image = "registry.invalid/acme/sample-provider:v1.2.3"
	manifest := filepath.Join(t.TempDir(), "sample.yaml")
	must(t, os.WriteFile(manifest, []byte(`apiVersion: openmcp.cloud/v1alpha1
kind: ServiceProvider
metadata:
  name: sample
spec:
  image: `+image+`
---
apiVersion: sample.services.openmcp.cloud/v1alpha1
kind: ProviderConfig
metadata:
  name: sample
spec:
  pollInterval: 1m
  versions: [v1]
`), 0o600))

	dirs := []string{filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "two")}
	for _, dir := range dirs {
		t.Cleanup(func() { _ = landscape.Down(context.Background(), dir, nil) })
	}
	outs := make([]string, len(dirs))
	errs := make([]error, len(dirs))
	begin := time.Now()
	var wg sync.WaitGroup
	for i, dir := range dirs {
		args := []string{"landscape", "up", "--control-plane-only", "--state-dir", dir,
			"--start-timeout", startTimeout.String(), "--image-map", image + "=" + sample}
		if i == 0 {
			args = append(args, "--manifest", manifest)
		}
		wg.Go(func() { outs[i], errs[i] = cliOutput(t.Context(), args...) })
	}
	wg.Wait()
	t.Logf("two landscapes up at once in %s", time.Since(begin).Round(10*time.Millisecond))
	for i := range dirs {
		if errs[i] != nil {
			t.Fatalf("landscape %d: up: %v\n%s", i, errs[i], outs[i])
		}
	}

	states := make([]*controlplane.State, len(dirs))
	for i, dir := range dirs {
		s := readState(t, dir)
		states[i] = s
		if s.Phase != controlplane.PhaseReady || !controlplane.Alive(s.Supervisor) {
			t.Errorf("landscape %d: phase %s, supervisor %+v; want Ready and running", i, s.Phase, s.Supervisor)
		}
		if i == 1 {
			validateOn(t, dir, image)
			continue
		}
		if !strings.Contains(outs[i], "Ready: ServiceProvider sample") {
			t.Errorf("landscape %d: the summary does not report the provider of the manifest Ready:\n%s", i, outs[i])
		}
		c := clientFromFile(t, s.Clusters[landscape.ClusterPlatform].Kubeconfig)
		sp := &providerv1alpha1.ServiceProvider{}
		must(t, c.Get(t.Context(), client.ObjectKey{Name: "sample"}, sp))
		if sp.Spec.Image != image || !apimeta.IsStatusConditionTrue(sp.Status.Conditions, string(providerv1alpha1.ConditionReady)) {
			t.Errorf("landscape %d: ServiceProvider sample: image %s, conditions %+v; want %s Ready", i, sp.Spec.Image, sp.Status.Conditions, image)
		}
		// The run process is the mapped binary.
		log, err := os.ReadFile(filepath.Join(dir, "providers", "serviceprovider-sample", "run-0.log"))
		must(t, err)
		if !strings.Contains(string(log), sample+" run") {
			t.Errorf("landscape %d: the run log does not show %s started:\n%s", i, sample, log)
		}
	}
	for port, use := range states[0].Ports() {
		if other, ok := states[1].Ports()[port]; ok {
			t.Errorf("both landscapes record port %d (%s / %s)", port, use, other)
		}
	}

	for i, dir := range dirs {
		out, err := cliOutput(t.Context(), "landscape", "down", "--state-dir", dir)
		if err != nil {
			t.Errorf("landscape %d: down: %v\n%s", i, err, out)
		}
		checkNothingLeft(t, states[i])
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("landscape %d: state directory after down: %v", i, err)
		}
	}
}

// validateOn runs the validation flow with the sample's manifests of
// examples/validate/sample on the running landscape in dir, whose operator
// maps image to the sample provider's binary: every step passes, and the
// provider's processes were the landscape's.
func validateOn(t *testing.T, dir, image string) {
	t.Helper()
	files, err := filepath.Glob("../../examples/validate/sample/*.yaml")
	must(t, err)
	spec, err := validation.SpecFromFiles(files...)
	must(t, err)
	must(t, unstructured.SetNestedField(spec.Provider.Object, image, "spec", "image"))
	check := func(ctx context.Context, env validation.CheckEnv) error {
		// The tenant's client of the MCP cluster serves the DomainServiceAPI.
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("domain.sample.services.openmcp.cloud/v1alpha1")
		list.SetKind("SampleObjectList")
		return env.ControlPlane.Client.List(ctx, list)
	}
	// The control plane is an API server the landscape starts while the
	// rest of the suite runs: CI saw its ClusterRequest pending for more
	// than 2 minutes at load average 54, with two landscapes up.
	rep := validation.Validate(t, spec, validationtarget.ExistingLandscape(dir), validation.WithCheck(check), validation.WithTimeout(2*time.Minute),
		validation.WithStepTimeout("control-plane", 6*time.Minute))
	for _, s := range rep.Steps {
		if s.Result != validation.ResultPassed {
			t.Errorf("validation on the landscape: step %s %s %q, want passed", s.ID, s.Result, s.Message)
		}
	}
	log, err := os.ReadFile(filepath.Join(dir, "providers", "serviceprovider-sample", "run-0.log"))
	must(t, err)
	if !strings.Contains(string(log), "run --environment") {
		t.Errorf("the landscape's run log of the validated provider shows no run:\n%s", log)
	}
}

// TestProviderCannotBind starts a landscape with a provider, under an
// arbitrary image name mapped to this test binary, whose run process
// cannot bind its port (the test holds it): Start must fail within
// seconds, not after the start timeout, and say why, with the process's
// own words (bind: address already in use).
func TestProviderCannotBind(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer held.Close()
	exe, err := os.Executable()
	must(t, err)
	const image = "registry.invalid/example/busy-provider:v0.1.0"
	manifest := filepath.Join(t.TempDir(), "busy.yaml")
	must(t, os.WriteFile(manifest, []byte(`apiVersion: openmcp.cloud/v1alpha1
kind: ServiceProvider
metadata:
  name: busy
spec:
  image: `+image+`
  env:
  - name: `+fakeProviderEnv+`
    value: `+held.Addr().String()+`
`), 0o600))

	dir := filepath.Join(t.TempDir(), "state")
	var out bytes.Buffer
	l, err := landscape.New(landscape.Config{
		StateDir: dir, Out: &out, StopTimeout: 5 * time.Second,
		// Long enough that only failing fast passes the test below.
		StartTimeout: 3 * time.Minute,
		Images:       mustImages(t, image+"="+exe),
	})
	must(t, err)
	t.Cleanup(func() {
		_ = l.Stop(context.Background())
		_ = landscape.Down(context.Background(), dir, nil)
	})
	var stepBegin time.Time
	l.AddStep("noting the time", func(context.Context, *landscape.Landscape) error { stepBegin = time.Now(); return nil })
	must(t, stack.AddManifests(l, []string{manifest}))

	err = l.Start(t.Context())
	if err == nil {
		t.Fatal("Start succeeded with a provider that cannot bind its port")
	}
	if stepBegin.IsZero() {
		t.Fatalf("Start failed before the manifests step: %v", err)
	}
	took := time.Since(stepBegin)
	t.Logf("Start failed %s after the manifests step began: %v", took.Round(10*time.Millisecond), err)
	// Init, the run process's start, its exit and the operator's status
	// update take a few seconds; 45 s leaves room for a loaded machine
	// and is far below the 3-minute timeout the wait would otherwise end at.
	if took > 45*time.Second {
		t.Errorf("Start failed %s after the manifests step began; want within seconds", took)
	}
	for _, want := range []string{"ServiceProvider busy", "bind: address already in use", held.Addr().String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "context deadline exceeded") {
		t.Errorf("the error is a bare timeout: %v", err)
	}
	checkNothingLeft(t, l.State())
}

// TestUserImages checks the parsing of --image-map and --image-map-file.
func TestUserImages(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "my-provider")
	must(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	plain := filepath.Join(dir, "not-executable")
	must(t, os.WriteFile(plain, []byte("x"), 0o644))
	file := filepath.Join(dir, "images.yaml")
	must(t, os.WriteFile(file, []byte("images:\n- image: registry.invalid/acme/other:*\n  binary: my-provider\n"), 0o600))

	cases := map[string]struct {
		maps, files []string
		want        map[string]string // image -> binary
		wantErr     string
	}{
		"flag and file": {
			maps:  []string{"registry.invalid:5000/acme/p:v1=" + bin},
			files: []string{file},
			want:  map[string]string{"registry.invalid:5000/acme/p:v1": bin, "registry.invalid/acme/other:*": bin},
		},
		"no equals sign":      {maps: []string{"registry.invalid/acme/p:v1"}, wantErr: "want IMAGE=BINARY"},
		"empty binary":        {maps: []string{"registry.invalid/acme/p:v1="}, wantErr: "want IMAGE=BINARY"},
		"missing binary":      {maps: []string{"registry.invalid/acme/p:v1=" + filepath.Join(dir, "nope")}, wantErr: "no such file"},
		"not executable":      {maps: []string{"registry.invalid/acme/p:v1=" + plain}, wantErr: "not an executable file"},
		"mapped twice":        {maps: []string{"registry.invalid/acme/other:*=" + bin}, files: []string{file}, wantErr: "mapped twice"},
		"wildcard in repo":    {maps: []string{"registry.invalid/*/p:v1=" + bin}, wantErr: "wildcard"},
		"missing map file":    {files: []string{filepath.Join(dir, "nope.yaml")}, wantErr: "read image map"},
		"nothing is no error": {want: map[string]string{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := landscape.UserImages(tc.maps, tc.files)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("UserImages = %v, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			must(t, err)
			gotMap := map[string]string{}
			for _, m := range got {
				gotMap[m.Image] = m.Binary
			}
			if fmt.Sprint(gotMap) != fmt.Sprint(tc.want) {
				t.Errorf("UserImages = %v; want %v", gotMap, tc.want)
			}
		})
	}
}

func mustImages(t *testing.T, maps ...string) []process.ImageMapping {
	t.Helper()
	got, err := landscape.UserImages(maps, nil)
	must(t, err)
	return got
}

// cliOutput runs the marketplane command with args and returns its output
// and error, for use off the test's goroutine.
func cliOutput(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := cli.NewRootCommand(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		err = fmt.Errorf("marketplane %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), err
}
