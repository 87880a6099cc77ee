package process

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

// Roles of a provider's processes; they name files in the state directory.
const (
	roleInit = "init"
	roleRun  = "run"
)

// Contract variables the process deployer adds besides the POD_* ones.
const (
	// EnvKubeconfig points at the kubeconfig of the process's
	// ServiceAccount.
	EnvKubeconfig = "KUBECONFIG"
	// PodIP is the value of POD_IP: processes listen on loopback.
	PodIP = "127.0.0.1"
)

// DefaultInheritedEnv are the variables of the operator's environment a
// provider process gets. WithInheritedEnv adds more.
var DefaultInheritedEnv = []string{"PATH", "HOME", "TMPDIR"}

// metricsFlag is the run argument whose port is rewritten per replica.
const metricsFlag = "--metrics-bind-address"

// validateWorkload returns the problem with w that the process deployer
// cannot run, in words for the provider's condition.
func validateWorkload(w *deploy.Workload) error {
	var errs []error
	if w.Kind == "" || w.Name == "" || strings.ContainsAny(w.Kind+w.Name, `/\`) || w.Name == "." || w.Name == ".." {
		errs = append(errs, fmt.Errorf("invalid provider kind %q or name %q", w.Kind, w.Name))
	}
	for _, e := range w.Env {
		if e.ValueFrom != nil {
			errs = append(errs, fmt.Errorf("env %s uses valueFrom, which the process deployer does not support", e.Name))
		}
	}
	return errors.Join(errs...)
}

// environment returns the environment of a process of w named podName
// acting as serviceAccount with the kubeconfig at kubeconfigPath. Later
// entries win: inherited variables, then spec.env, then the contract.
func (d *Deployer) environment(w *deploy.Workload, podName, serviceAccount, kubeconfigPath string) []string {
	var names []string
	values := map[string]string{}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, name := range d.opts.inheritEnv {
		if v, ok := os.LookupEnv(name); ok {
			set(name, v)
		}
	}
	for _, e := range w.Env {
		set(e.Name, e.Value)
	}
	set(providerv1alpha1.EnvPodName, podName)
	set(providerv1alpha1.EnvPodNamespace, w.Namespace)
	set(providerv1alpha1.EnvPodIP, PodIP)
	set(providerv1alpha1.EnvPodServiceAccountName, serviceAccount)
	set(EnvKubeconfig, kubeconfigPath)
	env := make([]string, 0, len(names))
	for _, name := range names {
		env = append(env, name+"="+values[name])
	}
	return env
}

// initArgs are the arguments of the init process.
func initArgs(w *deploy.Workload) []string {
	return slices.Concat(w.InitCommand, w.Args)
}

// runArgs are the arguments of run replica i: the run command, the
// contract arguments and the run arguments, with the metrics port moved to
// Metrics.Port+i so that replicas on one host do not clash. A local process
// serves metrics on loopback only: an empty or unspecified host (":8080",
// "0.0.0.0:8080") becomes 127.0.0.1, since nothing outside the host is
// meant to scrape it and no Service stands in front of it. With metrics
// off, --metrics-bind-address=0 is added: the provider's default port
// would otherwise be shared by every local provider.
func runArgs(w *deploy.Workload, i int) []string {
	runOnly := slices.Clone(w.RunArgs)
	if !w.Metrics.Enabled {
		if !slices.ContainsFunc(runOnly, func(a string) bool { return strings.HasPrefix(a, metricsFlag+"=") }) {
			runOnly = append(runOnly, metricsFlag+"=0")
		}
		return slices.Concat(w.RunCommand, w.Args, runOnly)
	}
	for j, a := range runOnly {
		addr, ok := strings.CutPrefix(a, metricsFlag+"=")
		if !ok {
			continue
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			continue // not host:port (e.g. "0" to disable): leave it
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		runOnly[j] = metricsFlag + "=" + net.JoinHostPort(host, strconv.Itoa(int(w.Metrics.Port)+i))
	}
	return slices.Concat(w.RunCommand, w.Args, runOnly)
}

// runPodName is POD_NAME of run replica i.
func runPodName(w *deploy.Workload, i int) string {
	return fmt.Sprintf("%s-%d", w.RunName, i)
}

// runSpecKey identifies everything that makes run processes differ: when
// it changes, they are restarted.
func runSpecKey(w *deploy.Workload, binary string) string {
	data, _ := json.Marshal(struct {
		UID                     string
		Generation              int64
		Binary, Namespace, Name string
		ServiceAccount          string
		Command, Args, RunArgs  []string
		Env                     any
		Replicas                int32
		Metrics                 deploy.Metrics
	}{
		string(w.Owner.UID), w.Generation, binary, w.Namespace, w.RunName, w.RunServiceAccount,
		w.RunCommand, w.Args, w.RunArgs, w.Env, w.Replicas, w.Metrics,
	})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
