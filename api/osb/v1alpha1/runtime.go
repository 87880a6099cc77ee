/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// The methods below let Marketplane's provider runtime (pkg/spruntime)
// drive SFServiceInstances and SFServiceBindings: the inter-operator is a
// service provider built on it. They read and write status.conditions,
// status.phase and status.observedGeneration; status.state, the Service
// Fabrik view, is left to the provisioner. Phase is common.Phase (which
// spruntime.Phase aliases), so this package does not import the runtime;
// the inter-operator's controllers check at compile time that both kinds
// implement spruntime.API.

// GetConditions returns a pointer to status.conditions.
func (in *SFServiceInstance) GetConditions() *[]metav1.Condition { return &in.Status.Conditions }

// GetPhase returns status.phase.
func (in *SFServiceInstance) GetPhase() common.Phase { return common.Phase(in.Status.Phase) }

// SetPhase writes status.phase.
func (in *SFServiceInstance) SetPhase(p common.Phase) { in.Status.Phase = string(p) }

// SetObservedGeneration writes status.observedGeneration.
func (in *SFServiceInstance) SetObservedGeneration(g int64) { in.Status.ObservedGeneration = g }

// GetConditions returns a pointer to status.conditions.
func (in *SFServiceBinding) GetConditions() *[]metav1.Condition { return &in.Status.Conditions }

// GetPhase returns status.phase.
func (in *SFServiceBinding) GetPhase() common.Phase { return common.Phase(in.Status.Phase) }

// SetPhase writes status.phase.
func (in *SFServiceBinding) SetPhase(p common.Phase) { in.Status.Phase = string(p) }

// SetObservedGeneration writes status.observedGeneration.
func (in *SFServiceBinding) SetObservedGeneration(g int64) { in.Status.ObservedGeneration = g }
