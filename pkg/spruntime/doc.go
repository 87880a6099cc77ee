// Package spruntime is the service provider runtime: a generic reconciler
// that turns writing a Marketplane (openMCP-compatible) service provider into
// implementing CreateOrUpdate and Delete, plus an optional Observe.
//
// The runtime owns what every provider needs and gets wrong when it does it
// by hand: finalizers, the ProviderConfig lookup and watch, cluster access
// (the tenant's MCP cluster and an optional workload cluster), status
// (observedGeneration, phase, the Ready and Synced conditions), events,
// metrics, requeue with jitter, the openmcp.cloud/operation and pause
// annotations, environment filtering, deletion that waits for tenants'
// objects (DeletionBlocked), and an orphan policy.
//
// # Wiring
//
// The manager runs on the onboarding cluster, where the API objects live;
// the platform cluster (ProviderConfig, Secrets) is a cluster.Cluster added
// to it:
//
//	platform, _ := cluster.New(platformConfig, ...)
//	mgr, _ := ctrl.NewManager(onboardingConfig, ...)
//	_ = mgr.Add(platform)
//	r, err := spruntime.NewAPIReconciler(flags.ProviderName,
//		func() *v1alpha1.Foo { return &v1alpha1.Foo{} },
//		func() *v1alpha1.ProviderConfig { return &v1alpha1.ProviderConfig{} },
//		&FooReconciler{}, access, platform,
//		spruntime.WithEnvironment(flags.Environment))
//	if err == nil {
//		err = r.SetupWithManager(mgr)
//	}
//
// # What a reconcile does
//
//  1. Get the object; gone means done. An object labelled (EnvironmentLabel)
//     for another environment, or annotated openmcp.cloud/operation=ignore,
//     is left alone without a status write. operation=reconcile is removed
//     and the reconcile goes on. A paused object (openmcp.cloud/paused=true)
//     gets Synced=False/Paused and nothing else happens.
//  2. Status is written once, at the end, only when it changed, through the
//     status subresource, with status.observedGeneration always set. Every
//     transition of Ready, Synced or DeletionBlocked (status or reason) is
//     recorded as an event.
//  3. The ProviderConfig named like the provider is read from the platform
//     cluster. Missing, being deleted or refused by its Validate
//     (ConfigValidator): Ready=False and Synced=False with reason
//     ProviderConfigMissing, ProviderConfigDeleting or
//     InvalidProviderConfig and no requeue; the ProviderConfig watch
//     reconciles every object when it changes.
//  4. Deletion. With openmcp.cloud/deletion-policy=Orphan, the author's
//     Delete is skipped: access is released, the finalizer removed and an
//     Orphaned event recorded. Otherwise the clusters are obtained (not
//     ready: look again after the wait interval); a UserResourceChecker that
//     reports objects sets DeletionBlocked=True/UserResourcesPresent naming
//     them and looks again after the wait interval without calling Delete;
//     when none are left DeletionBlocked turns False. Delete runs until it
//     returns a zero Result; then access is released (over as many
//     reconciles as Release needs, with Ready reason ReleasingClusterAccess)
//     and the finalizer <group>/finalizer is removed. A ProviderConfig is
//     needed to delete (Delete gets it); without one deletion waits.
//  5. Create or update. The finalizer is added (to an object that has
//     finalizers already, by a patch that conflicts only when they changed,
//     not on any write since the object was read); the clusters are obtained
//     (not ready: Ready=False/ClusterAccessPending and a look again after the
//     wait interval; an error: Synced=False/ClusterAccessFailed and backoff).
//     A Ready condition that the runtime wrote while waiting becomes
//     Progressing/Reconciling, so it never outlives what it reported. An
//     Observer that finds the service existing and up to date makes the
//     runtime skip CreateOrUpdate; Ready is then kept as the author last set
//     it, or set with StatusReady when the author has not set it (absent or
//     one of the runtime's waiting reasons). A difference that neither a
//     spec change nor a configuration change (ProviderConfig, or a watched
//     Secret or ConfigMap) explains is a drift: a DriftDetected warning
//     event, the drift metric, and the Synced message after CreateOrUpdate
//     repairs it. An InvalidUserInput error from Observe or CreateOrUpdate
//     sets Ready=False (phase Failed) and Synced=False with its reason, a
//     warning event, and no retry until the object or its configuration
//     changes; any other error sets Synced=False/ReconcileError and is retried
//     with exponential backoff. Success sets Synced=True.
//  6. Requeue after the author's RequeueAfter, or else after the poll
//     interval (the openmcp.cloud/poll-interval annotation, else the
//     ProviderConfig's PollInterval, else the default of one minute) varied
//     by a jitter of ±10%.
//
// Status writes of the runtime do not trigger reconciles: the object watch
// passes only changes of generation, labels or annotations and the start of
// deletion.
//
// # Image pull secrets
//
// PullSecrets copies the image pull secrets a ProviderConfig names
// (spec.imagePullSecrets, Secrets in the provider's namespace on the
// platform cluster) to the namespaces where the provider's workloads run:
// Sync from CreateOrUpdate, Diff from Observe, Remove from Delete. Copies
// are labelled as the provider's; a Secret of the same name that is not a
// copy is never overwritten, and problems are InvalidUserInput errors
// (ReasonPullSecretMissing, ReasonInvalidPullSecret,
// ReasonPullSecretConflict).
//
// # Metrics
//
// Registered with controller-runtime's metrics.Registry: reconciles by kind
// and result (MetricReconcilesTotal), failures by kind and reason
// (MetricReconcileErrorsTotal), reconcile duration by kind
// (MetricReconcileDuration) and drifts by kind (MetricDriftsTotal), next to
// controller-runtime's own controller_runtime_* metrics.
package spruntime
