/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// DefaultCatalogNamespace is the namespace on the platform cluster where the
// inter-operator looks for SFServices, SFPlans and SFClusters when the
// ProviderConfig names none.
const DefaultCatalogNamespace = "interoperator"

// Defaults of Limits.
const (
	// DefaultMaxObjects is how many objects one provision or bind render may
	// produce.
	DefaultMaxObjects = 100
	// DefaultMaxTransientErrors is how many consecutive transient errors
	// (network, server, unreachable template url) an operation survives
	// before it fails; it matches Service Fabrik's error threshold.
	DefaultMaxTransientErrors = 10
)

// Limits bound what one render and one operation may consume. Zero fields
// take the defaults of the renderer (package internal/render) or of this
// package.
type Limits struct {
	// renderTimeout bounds one template render, fetching excluded
	// (default 5s).
	// +optional
	RenderTimeout *common.Duration `json:"renderTimeout,omitempty"`
	// maxTemplateBytes bounds the text of one gotemplate (default 1 MiB),
	// at most 16 MiB: each of the concurrent renders holds and parses its
	// template in memory, and a template kept in an SFPlan is smaller than
	// etcd's 1.5 MiB anyway; the rest is room for templates from URLs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16777216
	MaxTemplateBytes int64 `json:"maxTemplateBytes,omitempty"`
	// maxOutputBytes bounds the rendered text of one template (default
	// 4 MiB), at most 64 MiB: the renderer's bound on all the values one
	// render may produce (internal/render DefaultMaxWorkBytes); the text is
	// held in memory and split into objects of at most 1 MiB each.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=67108864
	MaxOutputBytes int64 `json:"maxOutputBytes,omitempty"`
	// maxChartBytes bounds a Helm chart archive (default 10 MiB), at most
	// 100 MiB: Helm's own loader refuses a chart that decompresses to more.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=104857600
	MaxChartBytes int64 `json:"maxChartBytes,omitempty"`
	// maxObjects bounds how many objects one provision or bind render may
	// produce (default 100), at most 1000: the instance's status.resources
	// lists each one (up to about 400 bytes with a name of full length), and
	// the object must stay below etcd's 1.5 MiB with its spec and
	// status.appliedSpec.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxObjects int32 `json:"maxObjects,omitempty"`
	// maxTransientErrors is how many consecutive transient errors an
	// operation survives before its state becomes failed (default 10).
	// Transient errors are retried with exponential backoff. At most 1000:
	// with the backoff capped at 30 seconds, that is about eight hours of
	// retries, beyond which an operation would in effect never fail.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxTransientErrors int32 `json:"maxTransientErrors,omitempty"`
}

// ProviderConfigSpec configures the inter-operator.
type ProviderConfigSpec struct {
	// pollInterval is how often every SFServiceInstance and SFServiceBinding
	// is looked at when nothing changes (default one minute). Operations in
	// progress are looked at more often, with a backoff from one to thirty
	// seconds.
	// +optional
	PollInterval *common.Duration `json:"pollInterval,omitempty"`
	// catalogNamespace is the namespace on the platform cluster that holds
	// the SFServices, SFPlans and SFClusters (and the SFClusters' kubeconfig
	// Secrets) the inter-operator serves.
	// +optional
	// +kubebuilder:default=interoperator
	// +kubebuilder:validation:MaxLength=63
	CatalogNamespace string `json:"catalogNamespace,omitempty"`
	// defaultCluster is the name of the SFCluster that instances without
	// spec.clusterId are scheduled on. When empty, the only SFCluster of the
	// catalog namespace is used; with none, or several, such instances wait.
	// +optional
	DefaultCluster string `json:"defaultCluster,omitempty"`
	// schedulerType chooses how instances without spec.clusterId are
	// placed on the SFClusters: default (defaultCluster, or the only
	// cluster), round-robin, least-filled (fewest instances),
	// least-utilized (most free capacity) or label-selector (Service
	// Fabrik's: least-filled, or least-utilized for plans with
	// context.requests). Every scheduler honours cordons, Ready, the
	// plan's clusterSelector and capacity. When unset, the schedulerType
	// of Service Fabrik's interoperator-config ConfigMap in the catalog
	// namespace applies, else default.
	// +optional
	// +kubebuilder:validation:Enum=default;round-robin;least-filled;least-utilized;label-selector
	SchedulerType string `json:"schedulerType,omitempty"`
	// templateFileRoots are the directories, on the inter-operator's file
	// system, from which templates and charts may be read with file:// urls.
	// Without any, file urls are refused.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:items:Pattern=`^/`
	TemplateFileRoots []string `json:"templateFileRoots,omitempty"`
	// limits bound renders and operations.
	// +optional
	Limits *Limits `json:"limits,omitempty"`
	// renderPolicies widen, per plan, what rendered objects and sources may be (renderpolicy_types.go).
	// +optional
	// +listType=atomic
	RenderPolicies []RenderPolicy `json:"renderPolicies,omitempty"`
	// workloadClusters, when set, registers the openMCP Clusters of purpose
	// workload of a namespace as SFClusters, with access obtained through
	// AccessRequests (workloadclusters_types.go).
	// +optional
	WorkloadClusters *WorkloadClusters `json:"workloadClusters,omitempty"`
	// sisterProvisioner, when set, makes the inter-operator install its
	// own provisioner on every SFCluster in provisioning mode replicate
	// (sisterprovisioner_types.go).
	// +optional
	SisterProvisioner *SisterProvisioner `json:"sisterProvisioner,omitempty"`
}

// ProviderConfig configures the inter-operator. It is cluster-scoped, lives
// on the platform cluster and is named like the inter-operator's provider
// name.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:printcolumn:name="catalog",type=string,JSONPath=`.spec.catalogNamespace`
// +kubebuilder:printcolumn:name="default-cluster",type=string,JSONPath=`.spec.defaultCluster`
// +kubebuilder:printcolumn:name="scheduler",type=string,JSONPath=`.spec.schedulerType`
// +kubebuilder:printcolumn:name="age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec configures the inter-operator.
	// +optional
	Spec ProviderConfigSpec `json:"spec,omitempty"`
}

// PollInterval returns spec.pollInterval, or zero (the provider runtime's
// default) when it is unset or invalid (Validate reports that). It is safe
// on a nil receiver.
func (c *ProviderConfig) PollInterval() time.Duration {
	if c == nil {
		return 0
	}
	d, _ := c.Spec.PollInterval.Parse()
	return d
}

// RenderTimeout returns spec.limits.renderTimeout, or zero (the renderer's
// default) when it is unset or invalid (Validate reports that). It is safe
// on a nil receiver.
func (c *ProviderConfig) RenderTimeout() time.Duration {
	if c == nil || c.Spec.Limits == nil {
		return 0
	}
	d, _ := c.Spec.Limits.RenderTimeout.Parse()
	return d
}

// Validate reports the fields the API server's rules would refuse but that
// an object stored before those rules existed may still hold (durations
// that do not parse). The provider runtime calls it after reading the
// ProviderConfig and, on an error, reconciles none of the objects it
// configures, giving each the reason InvalidProviderConfig. It is safe on a
// nil receiver.
func (c *ProviderConfig) Validate() error {
	if c == nil {
		return nil
	}
	var errs []error
	errs = append(errs, c.Spec.PollInterval.Validate("spec.pollInterval"))
	if c.Spec.Limits != nil {
		errs = append(errs, c.Spec.Limits.RenderTimeout.Validate("spec.limits.renderTimeout"))
	}
	return errors.Join(errs...)
}

// CatalogNamespace returns spec.catalogNamespace, or
// DefaultCatalogNamespace when it is empty. It is safe on a nil receiver.
func (c *ProviderConfig) CatalogNamespace() string {
	if c == nil || c.Spec.CatalogNamespace == "" {
		return DefaultCatalogNamespace
	}
	return c.Spec.CatalogNamespace
}

// MaxObjects returns the effective limits.maxObjects. It is safe on a nil
// receiver.
func (c *ProviderConfig) MaxObjects() int {
	if c == nil || c.Spec.Limits == nil || c.Spec.Limits.MaxObjects <= 0 {
		return DefaultMaxObjects
	}
	return int(c.Spec.Limits.MaxObjects)
}

// MaxTransientErrors returns the effective limits.maxTransientErrors. It is
// safe on a nil receiver.
func (c *ProviderConfig) MaxTransientErrors() int {
	if c == nil || c.Spec.Limits == nil || c.Spec.Limits.MaxTransientErrors <= 0 {
		return DefaultMaxTransientErrors
	}
	return int(c.Spec.Limits.MaxTransientErrors)
}

// ProviderConfigList is a list of ProviderConfigs.
//
// +kubebuilder:object:root=true
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ProviderConfigs.
	Items []ProviderConfig `json:"items"`
}
