// Package process is the process deployer: it runs providers as local
// processes instead of pods, for the local landscape. It implements
// deploy.Deployer with the same contract as the Kubernetes deployer (seed
// 04): the provider's image is mapped to a local binary by an ImageMap; init
// runs that binary's init command to completion once per generation; run
// starts runReplicas supervised processes of its run command; both get the
// contract arguments and the POD_* environment, and a kubeconfig with a
// token of the provider's own ServiceAccount, so that least privilege holds
// locally as it does in a cluster.
//
// Everything lives in a state directory, one subdirectory per provider
// (<state>/<kind>-<name>, kind in lower case):
//
//	init-<generation>.done      init succeeded for that generation (JSON)
//	init.log, run-<i>.log       output of init and of run replica i
//	init.kubeconfig, init.token credentials of the init ServiceAccount
//	run.kubeconfig, run.token   credentials of the run ServiceAccount
//
// Processes run in the provider's directory. Remove deletes the
// credentials and the init records but keeps the logs, for debugging.
//
// The done markers let a restarted operator (a new Deployer on the same
// directory) skip an init it already ran; they carry the provider object's
// UID, so that a provider deleted and created again under the same name
// runs init again.
//
// What has no local meaning is ignored: image pull secrets, extra volumes
// and mounts, topology spread constraints and labels. There is no metrics
// Service either (RunStatus.MetricsService stays nil).
//
// # Init and run
//
// Init starts the init process in the background and reports InitRunning;
// a non-zero exit is InitFailed with the exit code and the last lines of
// init.log, retried once deploy.InitBackoff has passed (WithInitBackoff).
// Run refuses to start anything until init succeeded for the workload's
// generation. It keeps Replicas processes running, restarting one that
// exits after DefaultRestartBackoff (WithRestartBackoff), and is Ready once
// each has stayed up for the ready grace period (WithReadyGrace). Any
// change of the spec (generation, binary, command, arguments, env,
// replicas, service account, metrics) stops the old processes and starts
// new ones once the old have exited.
//
// # Environment
//
// A process does not inherit the operator's environment. It gets PATH, HOME
// and TMPDIR from the operator (plus the names given to WithInheritedEnv),
// then the provider's spec.env, then the contract variables POD_NAME
// (<init name> for init, <run name>-<i> for run replica i), POD_NAMESPACE
// (the provider namespace), POD_IP (127.0.0.1), POD_SERVICE_ACCOUNT_NAME and
// KUBECONFIG. Later entries win, so spec.env can override PATH but not the
// contract variables. Values of the form $(VAR) are not expanded, and env
// entries with valueFrom are rejected, as the process deployer has no
// downward API.
//
// # Credentials
//
// Before a process starts, the deployer mints a token for the workload's
// ServiceAccount (the init or the run one) with the TokenRequest API and
// writes it to <role>.token, and a kubeconfig (<role>.kubeconfig, mode 0600)
// whose server and CA are those of the platform API server and whose user
// reads the token from that file (tokenFile). Tokens last an hour by
// default (WithTokenTTL); a background refresher mints a new one when 80 %
// of the lifetime has passed and replaces the token file atomically.
// client-go re-reads a kubeconfig's tokenFile every minute, as it does for
// the projected token of a pod, so a running provider keeps working without
// a restart; a client that reads the token only once at start-up would need
// one (restart the provider, e.g. with a new generation). The init
// credentials are deleted as soon as init exits; the run credentials when
// the provider is removed or the deployer closed.
//
// # Metrics
//
// Replicas share the loopback address, so replica i listens for metrics on
// port Metrics.Port+i: the deployer rewrites the port of the
// --metrics-bind-address=<host>:<port> run argument per replica, and an
// empty or unspecified host (":8080") to 127.0.0.1: a local process is not
// scraped from other hosts, so it does not listen on their interfaces. With
// metrics off it passes --metrics-bind-address=0. Providers that all keep
// the default port clash with each other locally; give each provider its
// own spec.metrics.port (or disable metrics) in a landscape that runs
// several.
//
// # Lifetime
//
// Processes run in their own process group; stopping one sends SIGTERM to
// the group and SIGKILL after the stop timeout (WithStopTimeout). On Linux
// every process is started with Pdeathsig SIGKILL, so it dies with the
// operator even when the operator crashes. Pdeathsig fires when the thread
// that started the child ends, not the process, and the Go runtime may end
// threads; the deployer therefore starts all processes from one goroutine
// locked to its OS thread, which lives as long as the Deployer. Grandchildren
// a provider starts itself are not covered by Pdeathsig.
//
// # Notifications
//
// Nothing watches local processes, so Init reports RetryAfter (the poll
// interval, WithPollInterval) while init runs, and WithOnChange registers a
// function called whenever a process of a provider exits or becomes ready,
// which the operator can turn into a reconcile request.
package process
