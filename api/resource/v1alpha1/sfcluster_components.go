/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// SFClusterConditionComponentsReady says whether every component of an
// SFCluster's spec.components is installed, at the chart and values the
// spec names, and whether components that were removed from the spec are
// gone from the cluster. It is absent while the SFCluster has no
// components and none is left to remove.
const SFClusterConditionComponentsReady = "ComponentsReady"

// Reasons of the ComponentsReady condition, and states of a component.
const (
	// SFClusterReasonInstalled: every component is installed as the spec
	// says.
	SFClusterReasonInstalled = "Installed"
	// SFClusterReasonInstalling: a component is not installed yet, for
	// example because the cluster cannot be reached or the chart cannot be
	// fetched (retried).
	SFClusterReasonInstalling = "Installing"
	// SFClusterReasonInstallFailed: a component cannot be installed as it
	// is (its chart does not render, the API server refuses an object);
	// retrying does not help, a change of the component does.
	SFClusterReasonInstallFailed = "InstallFailed"
	// SFClusterReasonRemoving: the resources of a removed component, or of
	// every component while the SFCluster is offboarded, are being deleted.
	SFClusterReasonRemoving = "Removing"
)

// SFClusterComponent is one thing a cluster needs installed before
// instances are placed on it, typically the service operator the plans'
// templates rely on: a Helm chart with values. The inter-operator renders
// the chart client side and applies the objects to the cluster with
// server-side apply; it upgrades them when the chart or the values change
// and deletes them when the component is removed or the SFCluster is
// deleted. This field is a Marketplane extension; Service Fabrik expects
// service operators to be installed by hand.
type SFClusterComponent struct {
	// name identifies the component within the SFCluster. Its objects are
	// labelled interoperator.marketplane.io/component=<name>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// chart locates the Helm chart.
	Chart SFClusterComponentChart `json:"chart"`

	// values are the chart's values (a YAML or JSON object), merged over
	// the chart's own values.yaml.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Values *runtime.RawExtension `json:"values,omitempty"`

	// namespace is the release namespace (.Release.Namespace): namespaced
	// objects the chart renders without a namespace are put there, and it
	// is created when missing. Default: the component's name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// SFClusterComponentChart locates a Helm chart archive (.tgz).
type SFClusterComponentChart struct {
	// url is where the chart archive is: http(s)://, file:// (below the
	// ProviderConfig's templateFileRoots) or
	// configmap://<namespace>/<name>/<key>, with the same limits as the
	// charts of plan templates.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
}

// SFClusterComponentStatus is what is installed of one component.
type SFClusterComponentStatus struct {
	// name is the component's name.
	Name string `json:"name"`

	// state is Installed, Installing, InstallFailed or Removing (the
	// ComponentsReady reasons).
	// +optional
	State string `json:"state,omitempty"`

	// message says what failed or is awaited; empty once installed.
	// +optional
	Message string `json:"message,omitempty"`

	// chart is the url of the chart installed last.
	// +optional
	Chart string `json:"chart,omitempty"`

	// version is the version of the chart installed last (Chart.yaml).
	// +optional
	Version string `json:"version,omitempty"`

	// hash identifies what was installed last: the SHA-256 of the rendered
	// objects. A change of the chart or the values that changes no object
	// keeps it.
	// +optional
	Hash string `json:"hash,omitempty"`

	// resources are the objects the component has on the cluster: those
	// applied last, and, until they are gone, those a previous version had.
	// +optional
	// +listType=atomic
	Resources []SFClusterResourceRef `json:"resources,omitempty"`
}

// SFClusterResourceRef names an object on a cluster.
type SFClusterResourceRef struct {
	// apiVersion of the object.
	APIVersion string `json:"apiVersion"`
	// kind of the object.
	Kind string `json:"kind"`
	// name of the object.
	Name string `json:"name"`
	// namespace of the object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}
