package main

// The external-provisioner mode (-provisioner-cmd) runs another provisioner
// binary, in its own process group, against the same API server, plan and
// load as the in-process inter-operator, so that provisioners compare in
// one command. Its writes count as the provisioner's (everything but the
// benchmark's own), its CPU time is its process tree's. -crds, -cluster-id,
// -in-queue and -status-template give a provisioner that needs them its
// CRDs, scheduled instances, Service Fabrik's in_queue state and the
// sources and status templates; the interoperator-config ConfigMap sets
// its worker counts to -concurrency.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/bench/internal/procstat"
	"github.com/marketplane/marketplane/internal/interoperator/scheduling"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// kubeconfigPlaceholder in -provisioner-cmd's arguments becomes the path of
// the kubeconfig written for the benchmark's API server.
const kubeconfigPlaceholder = "{kubeconfig}"

// statusTemplate reports every instance's provision as succeeded, and
// sourcesTemplate names no sources for it. -status-template adds both to
// the plan for provisioners that need them (Service Fabrik's fails an
// instance whose plan lacks either).
const (
	statusTemplate = `provision:
  state: succeeded
  description: provisioned
`
	sourcesTemplate = "{}\n"
)

// externalConfig is what the flags of the external-provisioner mode set:
// another provisioner binary run against the same plan and API server in
// place of the in-process inter-operator.
type externalConfig struct {
	// command is the provisioner's command line, split at spaces; empty:
	// the in-process inter-operator.
	command string
	// crdsDir holds CRD manifests applied over the installed ones before
	// the provisioner starts.
	crdsDir string
	// clusterID is set as spec.clusterId of every instance created, as a
	// scheduler would.
	clusterID string
	// inQueue creates the instances with status.state in_queue, as
	// Service Fabrik's broker records them.
	inQueue bool
	// statusTemplate adds statusTemplate and sourcesTemplate to the plan.
	statusTemplate bool
	// logDir receives the kubeconfig and the provisioner's output; empty:
	// a new temporary directory.
	logDir string
}

// addFlags registers the flags of the external-provisioner mode on fs.
func (e *externalConfig) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&e.command, "provisioner-cmd", "", "run this provisioner command (path and arguments, split at spaces; "+kubeconfigPlaceholder+" becomes the path of a kubeconfig of the API server, which $KUBECONFIG names too) instead of the in-process inter-operator; the broker and direct phases are skipped")
	fs.StringVar(&e.crdsDir, "crds", "", "with -provisioner-cmd: apply the CRDs of the YAML files in this directory over the installed ones before the provisioner starts (a provisioner that needs its own)")
	fs.StringVar(&e.clusterID, "cluster-id", "", "set spec.clusterId of the instances created, as a scheduler would (a provisioner without one works only on scheduled instances)")
	fs.BoolVar(&e.inQueue, "in-queue", false, "create the instances with status.state in_queue, as Service Fabrik's broker records them (kept only where the CRD has no status subresource, see -crds)")
	fs.BoolVar(&e.statusTemplate, "status-template", false, "add a status template that reports succeeded and an empty sources template to the plan (a provisioner that needs them)")
}

// checkedExternal checks the flags of the external-provisioner mode and
// turns off the phases that need the in-process inter-operator.
func (c config) checkedExternal() (config, error) {
	e := c.external
	if e.command == "" {
		if e.crdsDir != "" {
			return c, errors.New("-crds needs -provisioner-cmd: the in-process inter-operator needs its own CRDs")
		}
		return c, nil
	}
	if len(strings.Fields(e.command)) == 0 {
		return c, errors.New("-provisioner-cmd is blank")
	}
	if c.servers != 1 || c.clusters > 1 {
		return c, errors.New("-provisioner-cmd needs -servers 1 and -clusters 1: the provisioner gets one kubeconfig")
	}
	if c.profilePhase != "load" {
		return c, errors.New("-provisioner-cmd runs no broker phase: -profile-phase must be load")
	}
	c.broker = false
	return c, nil
}

// shape makes inst what the flags ask the created instances to be.
func (e externalConfig) shape(inst *osbv1alpha1.SFServiceInstance) {
	if e.clusterID != "" {
		inst.Spec.ClusterID = e.clusterID
	}
	if e.inQueue {
		inst.Status.State = osbv1alpha1.StateInQueue
	}
}

// startProvisioner prepares the plan and CRDs the flags ask for, then starts
// the provisioner: the in-process inter-operator (and waits until its
// catalog accepted the plan), or -provisioner-cmd. It returns a reader of
// the platform cluster through the inter-operator's cache (nil for a
// command) and how to stop the provisioner. A command that exits before
// it is stopped ends the run through abort.
func startProvisioner(ctx context.Context, abort context.CancelCauseFunc, c config, rs roles, out io.Writer) (client.Reader, func(), error) {
	if c.external.statusTemplate {
		if err := addStatusTemplate(ctx, rs.platform.Client); err != nil {
			return nil, nil, err
		}
	}
	if d := c.external.describe(); d != "" {
		fmt.Fprintf(out, "changed for the provisioner: %s\n", d)
	}
	if c.external.command == "" {
		platformCache, stop, err := startInterOperator(ctx, c, rs)
		if err != nil {
			return nil, nil, err
		}
		if err := waitPlanValid(ctx, rs.platform.Client); err != nil {
			stop()
			return nil, nil, err
		}
		return platformCache, stop, nil
	}
	if c.external.crdsDir != "" {
		if err := applyCRDs(ctx, rs.platform, c.external.crdsDir); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(out, "CRDs of %s applied over the installed ones\n", c.external.crdsDir)
	}
	if err := writeWorkerCounts(ctx, rs.platform.Client, c.concurrency); err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(out, "ConfigMap %s/%s: instanceWorkerCount and bindingWorkerCount %d (-concurrency), for provisioners that read Service Fabrik's configuration\n",
		catalogNamespace, scheduling.ConfigMapName, c.concurrency)
	p, err := startCommand(c.external, rs.onboarding.Config, out, abort)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(out, "the broker and direct phases are skipped: they run the in-process inter-operator\n")
	return nil, p.stop, nil
}

// addStatusTemplate adds statusTemplate and sourcesTemplate to the
// benchmark's plan.
func addStatusTemplate(ctx context.Context, c client.Client) error {
	p := &osbv1alpha1.SFPlan{}
	key := client.ObjectKey{Namespace: catalogNamespace, Name: "one-configmap"}
	if err := c.Get(ctx, key, p); err != nil {
		return fmt.Errorf("get plan %s: %w", key, err)
	}
	p.Spec.Templates = append(p.Spec.Templates,
		osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionSources, Type: osbv1alpha1.TypeGoTemplate, Content: sourcesTemplate},
		osbv1alpha1.TemplateSpec{Action: osbv1alpha1.ActionStatus, Type: osbv1alpha1.TypeGoTemplate, Content: statusTemplate})
	if err := c.Update(ctx, p); err != nil {
		return fmt.Errorf("add a status template to plan %s: %w", key, err)
	}
	return nil
}

// writeWorkerCounts creates the interoperator-config ConfigMap in the
// catalog namespace with workers instance and binding workers: Service
// Fabrik's inter-operator reads its worker counts there, and so does
// Marketplane's when no flag sets them.
func writeWorkerCounts(ctx context.Context, c client.Client, workers int) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: catalogNamespace, Name: scheduling.ConfigMapName},
		Data:       map[string]string{scheduling.ConfigMapKey: fmt.Sprintf("instanceWorkerCount: %d\nbindingWorkerCount: %d\n", workers, workers)},
	}
	if err := c.Create(ctx, cm); err != nil {
		return fmt.Errorf("create ConfigMap %s: %w", scheduling.ConfigMapName, err)
	}
	return nil
}

// externalProcess is a provisioner command started in its own process
// group.
type externalProcess struct {
	cmd    *exec.Cmd
	label  string
	exited chan struct{}
	err    error // set before exited is closed
	once   sync.Once
}

// runningProvisioner is the provisioner command's process while it runs,
// so that cpuSeconds counts it and its children apart.
var runningProvisioner atomic.Pointer[externalProcess]

// startCommand writes a kubeconfig with cfg's server and credentials and
// starts e.command with it, its output going to a file.
func startCommand(e externalConfig, cfg *rest.Config, out io.Writer, abort context.CancelCauseFunc) (*externalProcess, error) {
	dir := e.logDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "bench-provisioner-"); err != nil {
			return nil, fmt.Errorf("create the provisioner's directory: %w", err)
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, cfg); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "provisioner.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create the provisioner's log: %w", err)
	}
	args := strings.Fields(e.command)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], kubeconfigPlaceholder, kubeconfig)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own group, so that stop reaches its children; killed with the
	// benchmark should the benchmark die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	p := &externalProcess{cmd: cmd, exited: make(chan struct{}),
		label: fmt.Sprintf("provisioner %s (pid %d and its children)", programName(args), cmd.Process.Pid)}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	runningProvisioner.Store(p)
	fmt.Fprintf(out, "provisioner command (pid %d): %s\n  KUBECONFIG=%s; its output: %s\n", cmd.Process.Pid, strings.Join(args, " "), kubeconfig, logPath)
	go p.reportEarlyExit(logPath, abort)
	return p, nil
}

// programName is the base name of the program args runs, past an env
// command and its variables.
func programName(args []string) string {
	if filepath.Base(args[0]) == "env" {
		for _, a := range args[1:] {
			if !strings.Contains(a, "=") && !strings.HasPrefix(a, "-") {
				return filepath.Base(a)
			}
		}
	}
	return filepath.Base(args[0])
}

// reportEarlyExit ends the run when the provisioner exits before it is
// stopped, since the benchmark would wait for instances that never come.
func (p *externalProcess) reportEarlyExit(logPath string, abort context.CancelCauseFunc) {
	<-p.exited
	if runningProvisioner.Load() == p {
		abort(fmt.Errorf("the provisioner command exited (%w) before the benchmark ended; see %s", p.err, logPath))
	}
}

// stop ends the provisioner's process group: SIGTERM, then SIGKILL after
// 10 s. Calling it again does nothing.
func (p *externalProcess) stop() {
	p.once.Do(func() {
		runningProvisioner.CompareAndSwap(p, nil)
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
		}
		// Children that ignored SIGTERM after their parent exited.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	})
}

// writeKubeconfig writes a kubeconfig with cfg's server, CA and client
// credentials to path.
func writeKubeconfig(path string, cfg *rest.Config) error {
	const name = "bench"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile, CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify: cfg.Insecure, TLSServerName: cfg.ServerName}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: cfg.CertFile, ClientCertificateData: cfg.CertData,
		ClientKey: cfg.KeyFile, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile,
		Username: cfg.Username, Password: cfg.Password}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// applyCRDs creates or replaces the CRDs of the YAML files in dir on
// the API server of cl and waits until the server serves them so.
func applyCRDs(ctx context.Context, cl *testenv.Cluster, dir string) error {
	crds, err := readCRDs(dir)
	if err != nil {
		return err
	}
	c := cl.Client
	for _, crd := range crds {
		old := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, old)
		switch {
		case apierrors.IsNotFound(err):
			err = c.Create(ctx, crd)
		case err == nil:
			crd.ResourceVersion = old.ResourceVersion
			err = c.Update(ctx, crd)
		}
		if err != nil {
			return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cl.Config)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	for _, crd := range crds {
		if err := waitServed(ctx, dc, crd); err != nil {
			return err
		}
	}
	return nil
}

// readCRDs decodes the CRDs of the .yaml and .yml files in dir.
func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read CRD directory: %w", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, ent := range entries {
		ext := filepath.Ext(ent.Name())
		if ent.IsDir() || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		path := filepath.Join(dir, ent.Name())
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("decode %s: %w", path, err)
			}
			if crd.Kind == "CustomResourceDefinition" {
				out = append(out, crd)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	return out, nil
}

// waitServed waits until discovery lists each served version of crd, with
// a status subresource exactly where crd has one: an updated CRD is served
// a moment after the update.
func waitServed(ctx context.Context, dc discovery.DiscoveryInterface, crd *apiextensionsv1.CustomResourceDefinition) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := crd.Spec.Group + "/" + v.Name
			list, err := dc.ServerResourcesForGroupVersion(gv)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			plural, status := false, false
			for _, r := range list.APIResources {
				plural = plural || r.Name == crd.Spec.Names.Plural
				status = status || r.Name == crd.Spec.Names.Plural+"/status"
			}
			wantStatus := v.Subresources != nil && v.Subresources.Status != nil
			if !plural || status != wantStatus {
				last = fmt.Sprintf("%s: %s served %t, status subresource %t (want %t)", gv, crd.Spec.Names.Plural, plural, status, wantStatus)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s is not served as applied (last seen: %s): %w", crd.Name, last, err)
	}
	return nil
}

// addProvisionerCPU adds the CPU time of the running provisioner command and
// its children to out, and renames this process's entry, which then holds
// the benchmark's clients only.
func addProvisionerCPU(out map[string]float64, selfLabel string) {
	p := runningProvisioner.Load()
	if p == nil {
		return
	}
	if v, ok := out[selfLabel]; ok {
		delete(out, selfLabel)
		out["benchmark process (clients)"] = v
	}
	out[p.label] = procstat.TreeCPU(p.cmd.Process.Pid)
}

// isProvisioner reports whether pid is the running provisioner command's.
func isProvisioner(pid int) bool {
	p := runningProvisioner.Load()
	return p != nil && p.cmd.Process.Pid == pid
}

// describe says how the flags change the plan and the instances created.
func (e externalConfig) describe() string {
	var parts []string
	if e.clusterID != "" {
		parts = append(parts, "spec.clusterId "+strconv.Quote(e.clusterID))
	}
	if e.inQueue {
		parts = append(parts, "status.state in_queue")
	}
	if e.statusTemplate {
		parts = append(parts, "an empty sources template and a status template reporting succeeded in the plan")
	}
	return strings.Join(parts, ", ")
}
