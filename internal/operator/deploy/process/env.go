package process

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

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

// runArgs are the arguments of the run processes before their listen
// addresses are assigned (assignListenAddresses, at each start): the run
// command, the contract arguments and the run arguments. With metrics off,
// --metrics-bind-address=0 is added, as the provider's default port would
// otherwise be shared by every local provider; unless the command line
// sets --health-probe-bind-address, it is added with a placeholder address
// that gets a free port, since kubebuilder providers listen on :8081 by
// default.
func runArgs(w *deploy.Workload) []string {
	args := slices.Concat(w.RunCommand, w.Args, w.RunArgs)
	if !w.Metrics.Enabled && !hasFlag(args, metricsFlag) {
		args = append(args, metricsFlag+"=0")
	}
	if !hasFlag(args, healthProbeFlag) {
		args = append(args, healthProbeFlag+"="+net.JoinHostPort(loopbackHost, "0"))
	}
	return args
}

// runPodName is POD_NAME of run replica i.
// Environment of in-cluster clients: client-go's rest.InClusterConfig reads
// the API server's address from these, the token and CA from the files
// next to the service-account namespace file.
const (
	EnvServiceHost = "KUBERNETES_SERVICE_HOST"
	EnvServicePort = "KUBERNETES_SERVICE_PORT"
)

// inClusterVars are KUBERNETES_SERVICE_HOST and _PORT of the platform API
// server at server, as NAME=value, or none when in-cluster clients cannot
// reach it (they speak HTTPS only).
func inClusterVars(server string) []string {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return []string{EnvServiceHost + "=" + u.Hostname(), EnvServicePort + "=" + port}
}

// inClusterEnv adds d.inCluster to env, for a process that gets the
// service-account files (token, ca.crt, namespace) in its mount namespace:
// providers built on openMCP's libraries (controller-utils' clusters) load
// the in-cluster configuration when no --kubeconfig is given, as in a pod.
// Variables spec.env set already are kept.
func (d *Deployer) inClusterEnv(env []string) []string {
	for _, kv := range d.inCluster {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") }) {
			env = append(env, kv)
		}
	}
	return env
}

func runPodName(w *deploy.Workload, i int) string {
	return fmt.Sprintf("%s-%d", w.RunName, i)
}

// runSpecKey identifies everything that makes run processes differ: when
// it changes, they are restarted.
func runSpecKey(w *deploy.Workload, binary string) string {
	data, _ := json.Marshal(struct { //nolint:errchkjson // API types from a decoded object always encode again
		UID                     string
		Generation              int64
		Binary, Namespace, Name string
		ServiceAccount          string
		Command, Args, RunArgs  []string
		Env                     []corev1.EnvVar
		Replicas                int32
		Metrics                 deploy.Metrics
	}{
		string(w.Owner.UID), w.Generation, binary, w.Namespace, w.RunName, w.RunServiceAccount,
		w.RunCommand, w.Args, w.RunArgs, w.Env, w.Replicas, w.Metrics,
	})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
