package provider

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/pkg/contract"
)

// contractEnv are the variables every Deployer sets itself; spec.env may
// not shadow them.
var contractEnv = []string{
	providerv1alpha1.EnvPodName,
	providerv1alpha1.EnvPodNamespace,
	providerv1alpha1.EnvPodIP,
	providerv1alpha1.EnvPodServiceAccountName,
}

// validate reports what makes spec impossible to deploy, in words for the
// InvalidSpec condition, or "" when nothing does. The CRD already rejects
// most of this; the reconciler checks again because objects can predate a
// CRD change and because a provider must never start with a contract
// violation.
func validate(spec *providerv1alpha1.DeploymentSpec) string {
	var problems []string
	if strings.TrimSpace(spec.Image) == "" {
		problems = append(problems, "spec.image is empty")
	}
	if _, ok := verbosity(spec.Verbosity); !ok {
		problems = append(problems, fmt.Sprintf("spec.verbosity %q is not one of DEBUG, INFO, ERROR", spec.Verbosity))
	}
	count := map[string]int{}
	for _, e := range spec.Env {
		count[e.Name]++
		switch {
		case count[e.Name] > 1:
			if count[e.Name] == 2 {
				problems = append(problems, fmt.Sprintf("spec.env has more than one variable named %s", e.Name))
			}
		case slices.Contains(contractEnv, e.Name):
			problems = append(problems, fmt.Sprintf("spec.env sets %s, which the operator sets itself", e.Name))
		}
	}
	if spec.RunReplicas < 0 {
		problems = append(problems, fmt.Sprintf("spec.runReplicas %d is negative", spec.RunReplicas))
	}
	return strings.Join(problems, "; ")
}

// verbosity returns the contract spelling (upper case) of v, INFO for an
// unset v, and whether v is valid. The CRD also allows the lower-case
// spellings openMCP accepts; providers always get the upper-case ones.
func verbosity(v providerv1alpha1.Verbosity) (string, bool) {
	if v == "" {
		return string(providerv1alpha1.VerbosityInfo), true
	}
	u := strings.ToUpper(string(v))
	switch u {
	case contract.VerbosityDebug, contract.VerbosityInfo, contract.VerbosityError:
		return u, true
	}
	return "", false
}

// contractArgs are the arguments seed 04 requires for both subcommands.
func contractArgs(environment, name, verbosity string) []string {
	return []string{
		"--" + contract.FlagEnvironment + "=" + environment,
		"--" + contract.FlagProviderName + "=" + name,
		"--" + contract.FlagVerbosity + "=" + verbosity,
	}
}

// runArgs are the arguments of the run subcommand only.
func runArgs(replicas int32, metrics deploy.Metrics) []string {
	var args []string
	if replicas > 1 {
		args = append(args, "--leader-elect=true")
	}
	if metrics.Enabled {
		args = append(args, fmt.Sprintf("--metrics-bind-address=:%d", metrics.Port))
	}
	return args
}

// baseWorkload is the part of a Workload that does not depend on the spec
// being valid: identity, names, labels. Deletion needs no more.
func (r *Reconciler[T]) baseWorkload(obj T, n names) *deploy.Workload {
	gvk := providerv1alpha1.GroupVersion.WithKind(r.kind.Name)
	return &deploy.Workload{
		Kind: r.kind.Name,
		Name: obj.GetName(),
		Owner: metav1.OwnerReference{
			APIVersion:         gvk.GroupVersion().String(),
			Kind:               gvk.Kind,
			Name:               obj.GetName(),
			UID:                obj.GetUID(),
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		},
		Generation:         obj.GetGeneration(),
		Namespace:          n.Namespace,
		InitName:           n.Init,
		RunName:            n.Run,
		InitServiceAccount: n.Init,
		RunServiceAccount:  n.Run,
		Metrics:            deploy.Metrics{ServiceName: n.MetricsService},
		Labels:             r.labels(n),
	}
}

// workload completes the base workload from a validated spec.
func (r *Reconciler[T]) workload(obj T, n names) *deploy.Workload {
	spec := r.kind.Spec(obj)
	w := r.baseWorkload(obj, n)
	v, _ := verbosity(spec.Verbosity)

	w.Image = spec.Image
	for _, s := range spec.ImagePullSecrets {
		w.ImagePullSecrets = append(w.ImagePullSecrets, corev1.LocalObjectReference{Name: s.Name})
	}
	w.InitCommand = orDefault(spec.InitCommand, "init")
	w.RunCommand = orDefault(spec.RunCommand, "run")
	w.Args = contractArgs(r.opts.environment, obj.GetName(), v)
	for _, e := range spec.Env {
		w.Env = append(w.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	w.Replicas = max(spec.RunReplicas, 1)
	w.ExtraVolumes = spec.ExtraVolumes
	w.ExtraVolumeMounts = spec.ExtraVolumeMounts
	w.TopologySpreadConstraints = spec.TopologySpreadConstraints
	w.Metrics = deploy.Metrics{
		Enabled:     spec.Metrics.IsEnabled(),
		Port:        spec.Metrics.MetricsPort(),
		Path:        spec.Metrics.MetricsPath(),
		ServiceName: n.MetricsService,
	}
	w.RunArgs = runArgs(w.Replicas, w.Metrics)
	return w
}

// labels are the labels of everything created for a provider named n.
func (r *Reconciler[T]) labels(n names) map[string]string {
	return map[string]string{
		providerv1alpha1.ManagedByLabel: ManagedByValue,
		LabelProviderKind:               r.kind.Name,
		LabelProviderName:               n.LabelValue,
	}
}

func orDefault(cmd []string, def string) []string {
	if len(cmd) == 0 {
		return []string{def}
	}
	return slices.Clone(cmd)
}
