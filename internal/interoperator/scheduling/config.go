package scheduling

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Service Fabrik's interoperator configuration is the YAML under the key
// "config" of the ConfigMap "interoperator-config". Service Fabrik reads it
// from the inter-operator's namespace, which also holds its SFClusters and
// plans; here that is the catalog namespace on the platform cluster.
const (
	ConfigMapName = "interoperator-config"
	ConfigMapKey  = "config"
)

// SFConfig is Service Fabrik's interoperator configuration. Keys it does
// not list (such as the controllers' watch lists) are ignored.
type SFConfig struct {
	// InstanceWorkerCount and BindingWorkerCount are how many instances,
	// and bindings, are reconciled at once. They are read when the
	// inter-operator starts.
	InstanceWorkerCount int `json:"instanceWorkerCount,omitempty"`
	BindingWorkerCount  int `json:"bindingWorkerCount,omitempty"`
	// SchedulerWorkerCount and ProvisionerWorkerCount size Service
	// Fabrik's separate scheduler and multi-cluster provisioner
	// controllers. Here the instance controller schedules, so they have
	// no meaning; they are accepted.
	SchedulerWorkerCount   int `json:"schedulerWorkerCount,omitempty"`
	ProvisionerWorkerCount int `json:"provisionerWorkerCount,omitempty"`
	// SchedulerType chooses the scheduler unless the ProviderConfig's
	// spec.schedulerType does.
	SchedulerType string `json:"schedulerType,omitempty"`
	// PrimaryClusterID is the SFCluster the default scheduler places
	// instances on unless the ProviderConfig names a defaultCluster.
	PrimaryClusterID string `json:"primaryClusterId,omitempty"`
}

// ReadSFConfig reads the interoperator-config ConfigMap of namespace.
// found is false when there is none. A ConfigMap whose config does not
// parse is an error; Service Fabrik then uses its defaults, and so do the
// callers, after saying so.
func ReadSFConfig(ctx context.Context, reader client.Reader, namespace string) (cfg SFConfig, found bool, err error) {
	cm := &corev1.ConfigMap{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ConfigMapName}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return SFConfig{}, false, nil
		}
		return SFConfig{}, false, fmt.Errorf("get ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
	}
	if err := yaml.Unmarshal([]byte(cm.Data[ConfigMapKey]), &cfg); err != nil {
		return SFConfig{}, true, fmt.Errorf("ConfigMap %s/%s, key %s: %w", namespace, ConfigMapName, ConfigMapKey, err)
	}
	if _, err := ParseType(cfg.SchedulerType); err != nil {
		return SFConfig{}, true, fmt.Errorf("ConfigMap %s/%s, key %s: schedulerType: %w", namespace, ConfigMapName, ConfigMapKey, err)
	}
	return cfg, true, nil
}
