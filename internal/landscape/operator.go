package landscape

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/pki"
	"github.com/marketplane/marketplane/internal/operator/app"
	"github.com/marketplane/marketplane/internal/operator/clusters/socketprovisioner"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
)

// OperatorBinary is the operator's executable, looked for in the
// landscape's binary directory like the providers' (`make build` puts it
// there).
const OperatorBinary = "marketplane-operator"

// OperatorReplicas is how many operator processes the landscape runs: they
// elect a leader, and when the leader dies the other takes over within the
// lease duration (Config.OperatorLease).
const OperatorReplicas = 2

// The operator replicas' leader election: they retry every
// operatorRetryPeriod and a leader gives up operatorRenewMargin before its
// lease (Config.OperatorLease) ends, so that it has stopped before another
// replica may take over.
const (
	operatorRetryPeriod = 2 * time.Second
	operatorRenewMargin = 3 * time.Second
	minOperatorLease    = operatorRetryPeriod + operatorRenewMargin
)

// OperatorProcess is the name of operator replica i in state.json, status
// and logs/.
func OperatorProcess(i int) string { return fmt.Sprintf("operator-%d", i) }

// operator is the provider operator: OperatorReplicas processes of
// marketplane-operator, and the local cluster provider they call over a
// Unix socket.
type operator struct {
	procs   []*controlplane.Proc
	server  *http.Server
	served  chan error
	sockDir string
}

// ImageMapFile is the process deployer's image map, in the state directory.
func (l *Landscape) ImageMapFile() string { return l.Layout.Path("images.yaml") }

// OperatorStateDir is the process deployer's state directory: a directory
// per provider with its logs and credentials.
func (l *Landscape) OperatorStateDir() string { return l.Layout.Path("providers") }

// startOperator writes the image map, serves the local cluster provider on
// a Unix socket and starts the operator replicas: `marketplane-operator run
// --deployer=process --leader-elect`, supervised like every process of the
// landscape. Only the leader runs controllers and provider processes; the
// providers die with it (Pdeathsig) and the next leader starts them again.
func (l *Landscape) startOperator() (err error) {
	images := l.cfg.Images
	if len(images) == 0 {
		// A resumed landscape runs the providers the user mapped before
		// (their objects are still there) without the flags again.
		if images = recordedUserImages(l.ImageMapFile()); len(images) > 0 {
			l.progressf("keeping the %d image mapping(s) of the earlier run (--image-map replaces them)", len(images))
		}
	}
	if err := WriteImageMap(l.ImageMapFile(), l.Binaries.Dir, images); err != nil {
		return err
	}
	binary := filepath.Join(l.Binaries.Dir, OperatorBinary)
	if err := operatorBinary(l.Binaries.Dir); err != nil {
		return err
	}
	// The socket lives in a directory of its own that only this user may
	// enter (MkdirTemp makes it 0700): whoever can connect may create
	// clusters. Not in the state directory, whose path may be longer than
	// a socket address allows (108 bytes).
	sockDir, err := os.MkdirTemp("", "marketplane-provisioner-")
	if err != nil {
		return fmt.Errorf("operator: socket directory: %w", err)
	}
	op := &operator{sockDir: sockDir, served: make(chan error, 1)}
	l.operator = op
	sock := filepath.Join(sockDir, "provisioner.sock")
	ln, err := socketprovisioner.Listen(sock)
	if err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	op.server = &http.Server{
		Handler:           socketprovisioner.Handler(l.provisioner),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          stdlog.New(io.Discard, "", 0),
	}
	go func() {
		err := op.server.Serve(ln)
		op.served <- err
		if !errors.Is(err, http.ErrServerClosed) {
			l.fail(fmt.Errorf("operator: the local cluster provider's socket: %w", err))
		}
	}()

	args := []string{"run",
		"--environment=" + l.cfg.Environment,
		"--provider-name=" + OperatorProviderName,
		"--verbosity=INFO",
		"--kubeconfig=" + l.Platform.KubeconfigPath,
		"--onboarding-kubeconfig=" + l.Onboarding.KubeconfigPath,
		"--namespace=" + Namespace,
		"--deployer=" + app.DeployerProcess,
		"--process-images=" + l.ImageMapFile(),
		"--state-dir=" + l.OperatorStateDir(),
		"--cluster-provisioner=" + socketprovisioner.Scheme + sock,
		"--leader-elect",
		"--leader-elect-lease-duration=" + l.cfg.OperatorLease.String(),
		"--leader-elect-renew-deadline=" + (l.cfg.OperatorLease - operatorRenewMargin).String(),
		"--leader-elect-retry-period=" + operatorRetryPeriod.String(),
		// Nothing listens: the landscape checks the operator by what it
		// does (the Clusters Ready), and the replicas would need ports of
		// their own.
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--onboarding-retry-interval=1s",
	}
	if l.backend == BackendKCP {
		// MCPs get a Cluster of the profile kcp, which the kcp provider
		// serves with a workspace; other purposes keep the local cluster
		// provider.
		args = append(args, "--cluster-profile="+clustersv1alpha1.PurposeMCP+"="+KCPProfile)
	}
	for i := range OperatorReplicas {
		p, err := l.startRecorded(OperatorProcess(i), binary, args)
		if err != nil {
			return fmt.Errorf("operator: %w", err)
		}
		op.procs = append(op.procs, p)
	}
	return nil
}

// operatorBinary checks that the operator is in dir.
func operatorBinary(dir string) error {
	binary := filepath.Join(dir, OperatorBinary)
	if fi, err := os.Stat(binary); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s not found or not executable (run 'make build'): %w", binary, controlplane.ErrBinaryMissing)
	}
	return nil
}

// OperatorProviderName is the operator's --provider-name: it names its
// leader-election Lease (marketplane-operator-<name>).
const OperatorProviderName = "landscape"

// stop stops the operator replicas, which stop the providers they run,
// and then the cluster provider's socket.
func (o *operator) stop(timeout time.Duration) error {
	var wg sync.WaitGroup
	for _, p := range o.procs {
		wg.Go(func() { p.Stop(timeout + 20*time.Second) })
	}
	wg.Wait()
	var err error
	if o.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if serr := o.server.Shutdown(ctx); serr != nil {
			err = fmt.Errorf("operator: stop the cluster provider's socket: %w", serr)
		}
	}
	return errors.Join(err, os.RemoveAll(o.sockDir))
}

// failed returns why the cluster provider's socket stopped serving, else
// nil. The operator processes themselves are restarted when they exit.
func (o *operator) failed() error {
	select {
	case err := <-o.served:
		o.served <- err
		return fmt.Errorf("operator: the cluster provider's socket stopped serving: %w", err)
	default:
		return nil
	}
}

// WriteImageMap writes the process deployer's image map to path: an entry
// Image(b) → <binDir>/<b> for every executable b in binDir other than the
// control plane's, and then extra. Any tag of such an image maps to the
// binary (repo:*).
func WriteImageMap(path, binDir string, extra []process.ImageMapping) error {
	m := process.ImageMap{Images: []process.ImageMapping{}}
	entries, err := os.ReadDir(binDir)
	if err != nil {
		return fmt.Errorf("list binaries: %w", err)
	}
	skip := []string{KCPBinary, controlplane.EtcdBinary, controlplane.APIServerBinary, controlplane.ControllerManagerBinary, controlplane.SchedulerBinary, controlplane.KwokBinary}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || slices.Contains(skip, name) {
			continue
		}
		if fi, err := e.Info(); err != nil || fi.Mode()&0o111 == 0 {
			continue
		}
		m.Images = append(m.Images, process.ImageMapping{
			Image:  ImageRegistry + "/" + name + ":" + process.AnyTag,
			Binary: filepath.Join(binDir, name),
		})
	}
	m.Images = append(m.Images, extra...)
	if err := m.Validate(); err != nil {
		return fmt.Errorf("image map: %w", err)
	}
	data, err := yaml.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode image map: %w", err)
	}
	return pki.WriteFileAtomic(path, data, 0o600)
}

// leaseAcquired is what client-go's leader election logs (through klog,
// whose header carries the PID) when a replica becomes the leader.
const leaseAcquired = `"Successfully acquired lease"`

// OperatorLeader returns the name of the operator replica that leads
// according to state s and the replicas' logs: the running replica whose
// current process logged that it acquired the lease. It returns "" while
// none has.
func OperatorLeader(s *controlplane.State) string {
	for i := range OperatorReplicas {
		name := OperatorProcess(i)
		p := s.Processes[name]
		if p == nil || p.Log == "" || !controlplane.Alive(p) {
			continue
		}
		if loggedByPID(p.Log, p.PID, leaseAcquired) {
			return name
		}
	}
	return ""
}

// loggedByPID reports whether the klog-formatted log at path has a line
// of process pid containing text. klog's header is "Lmmdd hh:mm:ss.uuuuuu
// pid file:line] msg".
func loggedByPID(path string, pid int, text string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	want := strconv.Itoa(pid)
	for line := range strings.Lines(string(data)) {
		if !strings.Contains(line, text) {
			continue
		}
		if f := strings.Fields(line); len(f) > 3 && f[2] == want {
			return true
		}
	}
	return false
}
