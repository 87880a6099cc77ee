package kube

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

// Prometheus scrape annotations on the run pods when metrics are on.
const (
	annotationScrape = "prometheus.io/scrape"
	annotationPort   = "prometheus.io/port"
	annotationPath   = "prometheus.io/path"
	annotationScheme = "prometheus.io/scheme"
)

// Run applies the run Deployment and, with metrics on, the metrics Service
// (deleting it when metrics are off), and reports whether the Deployment
// has rolled out.
func (d *Deployer) Run(ctx context.Context, w *deploy.Workload) (deploy.RunStatus, error) {
	dep := runDeployment(w)
	if err := apply(ctx, d.client, dep); err != nil {
		return deploy.RunStatus{}, err
	}

	var metricsRef *types.NamespacedName
	svc := metricsService(w)
	if w.Metrics.Enabled {
		if err := apply(ctx, d.client, svc); err != nil {
			return deploy.RunStatus{}, err
		}
		metricsRef = &types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	} else if _, err := d.delete(ctx, w, svc); err != nil {
		return deploy.RunStatus{}, err
	}

	ready, msg := rolledOut(dep)
	return deploy.RunStatus{Ready: ready, Message: msg, MetricsService: metricsRef}, nil
}

// runDeployment is the run Deployment of w.
func runDeployment(w *deploy.Workload) *appsv1.Deployment {
	selector := podLabels(w, ComponentRun)
	spec := podSpec(w, runContainer, w.RunServiceAccount, concat(w.RunCommand, w.Args, w.RunArgs))
	for _, c := range w.TopologySpreadConstraints {
		c := *c.DeepCopy()
		// The constraints count the run pods; only the operator knows
		// their labels.
		c.LabelSelector = &metav1.LabelSelector{MatchLabels: podLabels(w, ComponentRun)}
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, c)
	}
	var annotations map[string]string
	if w.Metrics.Enabled {
		spec.Containers[0].Ports = []corev1.ContainerPort{{
			Name:          providerv1alpha1.MetricsPortName,
			ContainerPort: w.Metrics.Port,
			Protocol:      corev1.ProtocolTCP,
		}}
		annotations = map[string]string{
			annotationScrape: "true",
			annotationPort:   strconv.Itoa(int(w.Metrics.Port)),
			annotationPath:   w.Metrics.Path,
			// The provider serves metrics on a pod address over HTTPS to
			// authorized bearer tokens only (providerapp's
			// --metrics-secure, on by default).
			annotationScheme: "https",
		}
	}
	return &appsv1.Deployment{
		ObjectMeta: objectMeta(w, w.RunName, ComponentRun),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(w.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels(w, ComponentRun), Annotations: annotations},
				Spec:       spec,
			},
		},
	}
}

// metricsService is the ClusterIP Service in front of the run pods'
// metrics endpoint.
func metricsService(w *deploy.Workload) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(w, metricsServiceName(w), ComponentRun),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: podLabels(w, ComponentRun),
			Ports: []corev1.ServicePort{{
				Name:       providerv1alpha1.MetricsPortName,
				Port:       w.Metrics.Port,
				TargetPort: intstr.FromString(providerv1alpha1.MetricsPortName),
				Protocol:   corev1.ProtocolTCP,
			}},
		},
	}
}

// rolledOut reports whether a Deployment has rolled out completely (the
// test of kubectl rollout status): its controller saw the current spec,
// every replica is updated and available, and no old one is left.
func rolledOut(dep *appsv1.Deployment) (bool, string) {
	want := ptr.Deref(dep.Spec.Replicas, 1)
	s := dep.Status
	switch {
	case s.ObservedGeneration < dep.Generation:
		return false, fmt.Sprintf("Deployment %s: waiting for generation %d to be observed", dep.Name, dep.Generation)
	case s.UpdatedReplicas < want:
		return false, fmt.Sprintf("Deployment %s: %d of %d run instances updated", dep.Name, s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return false, fmt.Sprintf("Deployment %s: %d old run instances are still terminating", dep.Name, s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < want:
		return false, fmt.Sprintf("Deployment %s: %d of %d run instances available", dep.Name, s.AvailableReplicas, want)
	}
	return true, fmt.Sprintf("Deployment %s: %d of %d run instances available", dep.Name, s.AvailableReplicas, want)
}
