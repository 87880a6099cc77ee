package kube

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

// contractEnv are the POD_* variables of the contract, from the downward
// API, followed by the provider's own variables.
func contractEnv(w *deploy.Workload) []corev1.EnvVar {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path},
		}}
	}
	env := []corev1.EnvVar{
		field(providerv1alpha1.EnvPodName, "metadata.name"),
		field(providerv1alpha1.EnvPodNamespace, "metadata.namespace"),
		field(providerv1alpha1.EnvPodIP, "status.podIP"),
		field(providerv1alpha1.EnvPodServiceAccountName, "spec.serviceAccountName"),
	}
	return append(env, w.Env...)
}

// podSpec is what the init and run pods share: the service account, pull
// secrets, extra volumes, and one container running the provider binary
// with the given arguments.
func podSpec(w *deploy.Workload, container, serviceAccount string, args []string) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName: serviceAccount,
		ImagePullSecrets:   slices.Clone(w.ImagePullSecrets),
		Volumes:            slices.Clone(w.ExtraVolumes),
		Containers: []corev1.Container{{
			Name:  container,
			Image: w.Image,
			// The image's entrypoint is the provider binary; the
			// subcommand and contract flags are its arguments.
			Args:         args,
			Env:          contractEnv(w),
			VolumeMounts: slices.Clone(w.ExtraVolumeMounts),
			// A failing provider that writes no termination message
			// still explains itself through the end of its log.
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}
}

// concat joins argument lists into a new slice.
func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
