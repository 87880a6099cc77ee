package v1alpha1

// DeploymentPhase summarises the state of a provider's deployment.
type DeploymentPhase string

// ConditionType names a condition a provider object reports.
type ConditionType string

// ConditionReason is the machine-readable reason of a provider condition.
type ConditionReason string

// Phases, condition types and reasons of provider objects. The operator
// sets Initialized from the init Job, Ready from the run Deployment and,
// while the provider object is deleted, Uninstalled.
const (
	// PhaseProgressing means that the provider is being initialised or
	// (re)deployed and is not ready yet.
	PhaseProgressing DeploymentPhase = "Progressing"
	// PhaseReady means that the init Job completed for the current
	// generation and the run Deployment is available.
	PhaseReady DeploymentPhase = "Ready"
	// PhaseUninstalling means that the provider object is being deleted and
	// the operator is removing what it created.
	PhaseUninstalling DeploymentPhase = "Uninstalling"

	// ConditionInitialized reports the init Job of the current generation.
	ConditionInitialized ConditionType = "Initialized"
	// ConditionReady reports whether the run Deployment is available.
	ConditionReady ConditionType = "Ready"
	// ConditionUninstalled reports the clean-up during deletion.
	ConditionUninstalled ConditionType = "Uninstalled"
	// ConditionResourcesAccepted reports whether the operator honours every
	// entry of the provider's status.resources and every group of its
	// spec.accessPolicy.apiGroups (docs/operator.md "API group ownership").
	// When False, its reason is that of the first rejected entry (sorted by
	// group) and its message lists them all; the entries that are accepted
	// keep working.
	ConditionResourcesAccepted ConditionType = "ResourcesAccepted"

	// ReasonInitPending means that the init Job has not been started yet.
	ReasonInitPending ConditionReason = "InitPending"
	// ReasonInitJobCreationFailed means that the init Job (or its service
	// account and RBAC) could not be created.
	ReasonInitJobCreationFailed ConditionReason = "InitJobCreationFailed"
	// ReasonInitRunning means that the init Job is running.
	ReasonInitRunning ConditionReason = "InitRunning"
	// ReasonInitCompleted means that the init Job of the current generation
	// succeeded.
	ReasonInitCompleted ConditionReason = "InitCompleted"

	// ReasonProviderInstallationPending means that the run Deployment waits
	// for the init Job.
	ReasonProviderInstallationPending ConditionReason = "ProviderInstallationPending"
	// ReasonProviderInstallationFailed means that the run Deployment (or its
	// service account and RBAC) could not be created or updated.
	ReasonProviderInstallationFailed ConditionReason = "ProviderInstallationFailed"
	// ReasonProviderNotReady means that the run Deployment exists but is not
	// available yet.
	ReasonProviderNotReady ConditionReason = "ProviderNotReady"
	// ReasonProviderReady means that the run Deployment is available.
	ReasonProviderReady ConditionReason = "ProviderReady"
	// ReasonProviderCrashing (Marketplane) means that a run instance
	// exited or could not start and waits to be restarted; the message
	// says which and why.
	ReasonProviderCrashing ConditionReason = "ProviderCrashing"
	// ReasonInitFailed (Marketplane) means that the last init attempt
	// failed; another follows after a backoff. The message carries the
	// failure.
	ReasonInitFailed ConditionReason = "InitFailed"

	// ReasonUninstalling means that the operator is deleting the provider's
	// Deployment, Job, service accounts and bindings.
	ReasonUninstalling ConditionReason = "Uninstalling"
	// ReasonUninstallFailed means that the clean-up hit an error; it is
	// retried.
	ReasonUninstallFailed ConditionReason = "UninstallFailed"
)
