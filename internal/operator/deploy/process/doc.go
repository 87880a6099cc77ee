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
// Service either (RunStatus.MetricsService stays nil); the metrics address
// is in the run status message instead (see Listen addresses).
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
// new ones once the old have exited. A restarted process gets new ports.
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
// # Listen addresses
//
// In a cluster each pod has its own network namespace; local processes
// share the loopback interface. So every run process gets free loopback
// ports of its own, chosen at each start, for the bind-address flags of
// the kubebuilder layout that openMCP providers and pkg/providerapp use:
// --metrics-bind-address (the contract passes it when metrics are on;
// with metrics off the deployer passes --metrics-bind-address=0),
// --health-probe-bind-address (added unless the command line sets it, as
// kubebuilder providers listen on :8081 by default) and
// --pprof-bind-address (only rewritten when the spec's runCommand passes
// it: it is off by default, and a binary that does not define a flag exits
// with "unknown flag"). Any host:port value becomes 127.0.0.1:<free port>
// (spec.metrics.port is the container port of a pod and has no meaning
// locally); values that are not host:port, such as "0", stay. The
// addresses are published in the run status message ("sp-x-0 listens on
// metrics 127.0.0.1:41234, health probe 127.0.0.1:41235"), which becomes
// the Ready condition's message, in the deployer's log line per started
// process and in the header line of run-<i>.log.
//
// # Service-account namespace file
//
// controller-runtime's leader election, without LeaderElectionNamespace,
// reads ServiceAccountNamespaceFile, which exists only in pods; an
// unmodified provider with runReplicas > 1 (--leader-elect=true) fails
// without it. On Linux the deployer therefore starts every process
// through a helper: its own executable (/proc/self/exe, with the marker
// variable nsHelperEnv, handled by this package's init function) in a new
// mount namespace, and in a user namespace too when the operator is not
// root. The helper makes all mounts private, so nothing reaches the host,
// puts a tmpfs with the file (the provider's namespace) at
// /var/run/secrets/kubernetes.io/serviceaccount, removes the marker and
// executes the provider in its place. In a user namespace the operator's
// user is mapped to root (the only way the helper may mount after its own
// execve); the helper empties its capability bounding set first, so the
// provider sees itself as uid 0 but has no privilege, and is the
// operator's user on the host. The provider keeps the process, arguments,
// environment, process group and parent-death signal of the helper. When
// that directory does not exist, its deepest existing parent (normally
// /run) is covered by a tmpfs that mirrors it with bind mounts of every
// entry, so the provider still sees what /run held when it started (not
// entries created on the host later). Next to the file the helper links
// token and ca.crt to the process's token file and the platform CA in the
// provider's directory, and the deployer sets KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT to the platform API server (unless spec.env sets
// them), so that client-go's in-cluster configuration works as in a pod:
// providers built on openMCP's libraries load it when no --kubeconfig is
// given and ignore KUBECONFIG. The token is the same one the kubeconfig
// names, refreshed by rename, which the link follows.
//
// Whether this works is found out once per Deployer, by running the helper
// in check mode. Where it does not (not Linux, or no right to create the
// namespaces, as in some CI containers), processes start without the file,
// the deployer logs why once, each run log's header says so, and so does
// every run status message ("no /var/run/secrets/.../namespace for leader
// election: ..."). WithoutNamespaceFile turns the helper off.
//
// # Lifetime
//
// Processes run in their own process group (the helper of the namespace
// file keeps it, as it becomes the provider); stopping one sends SIGTERM to
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
