package process

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/marketplane/marketplane/pkg/supervisor"
)

// errClosed is returned when the Deployer was closed.
var errClosed = errors.New("process deployer is closed")

// command is one process to start.
type command struct {
	binary string
	args   []string
	env    []string
	dir    string
	// logPath receives the process's stdout and stderr, appended after a
	// header line.
	logPath string
	header  string
	// namespace goes into the service-account namespace file of the
	// process's mount namespace (see nsfile.go).
	namespace string
	// tokenFile and caFile are linked as the service account's token and
	// ca.crt next to it, for providers that use the in-cluster
	// configuration (see nsfile.go).
	tokenFile, caFile string
}

// startProcess starts c through the Deployer's supervisor.Spawner, output
// appended to its log, in a private mount namespace with the
// service-account namespace file when the system allows it.
func (d *Deployer) startProcess(ctx context.Context, c command) (*supervisor.Process, error) {
	ns, nsErr := d.namespaceFile(ctx)
	cmd := exec.Command(c.binary, c.args...)
	cmd.Env, cmd.Dir = c.env, c.dir
	sc := supervisor.Command{Name: filepath.Base(c.binary), Cmd: cmd, LogPath: c.logPath, Header: c.header}
	if nsErr != nil {
		sc.Notes = append(sc.Notes, fmt.Sprintf("started without the service-account namespace file: %v", nsErr))
	}
	if ns != nil {
		cmd.Env = d.inClusterEnv(cmd.Env)
		sc.Prepare = func(cmd *exec.Cmd) error {
			return wrapWithNamespaceFile(cmd, nsHelperSpec{Namespace: c.namespace, Token: c.tokenFile, CA: c.caFile}, ns)
		}
	}
	return d.spawner.Start(sc)
}

// Limits of the log excerpt in a status message.
const (
	tailLines = 5
	tailBytes = 400
)
