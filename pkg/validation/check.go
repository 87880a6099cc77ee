package validation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/marketplane/marketplane/pkg/syncbuf"
)

// checkOutputLines is how many lines of a command's output an error of
// CommandCheck carries.
const checkOutputLines = 20

// Environment variables a CommandCheck's command gets, next to the
// process's own: KUBECONFIG is the tenant's MCP kubeconfig when the flow
// created a control plane, else the onboarding cluster's.
const (
	EnvPlatformKubeconfig   = "PLATFORM_KUBECONFIG"
	EnvOnboardingKubeconfig = "ONBOARDING_KUBECONFIG"
	EnvWorkloadKubeconfig   = "WORKLOAD_KUBECONFIG"
	EnvMCPKubeconfig        = "MCP_KUBECONFIG"
)

// CommandCheck returns a check that runs command with `sh -c`. The command
// gets KUBECONFIG (the tenant's MCP kubeconfig when there is a control
// plane, else the onboarding cluster's) and PLATFORM_KUBECONFIG,
// ONBOARDING_KUBECONFIG, WORKLOAD_KUBECONFIG and MCP_KUBECONFIG (empty when
// there is no such cluster). Its output (stdout and stderr) goes to
// CheckEnv.Out; a non-zero exit fails the check with the output's tail.
func CommandCheck(command string) CheckFunc {
	return func(ctx context.Context, env CheckEnv) error {
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		kubeconfig := env.Kubeconfigs["mcp"]
		if kubeconfig == "" {
			kubeconfig = env.Kubeconfigs[ClusterOnboarding]
		}
		cmd.Env = append(os.Environ(),
			"KUBECONFIG="+kubeconfig,
			EnvPlatformKubeconfig+"="+env.Kubeconfigs[ClusterPlatform],
			EnvOnboardingKubeconfig+"="+env.Kubeconfigs[ClusterOnboarding],
			EnvWorkloadKubeconfig+"="+env.Kubeconfigs[ClusterWorkload],
			EnvMCPKubeconfig+"="+env.Kubeconfigs["mcp"],
		)
		var out syncbuf.Buffer
		w := io.Writer(&out)
		if env.Out != nil {
			w = io.MultiWriter(&out, env.Out)
		}
		cmd.Stdout, cmd.Stderr = w, w
		err := cmd.Run()
		if err == nil {
			return nil
		}
		what := err.Error()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			what = fmt.Sprintf("exited with code %d", exit.ExitCode())
		}
		tail := tailLines(out.String(), checkOutputLines)
		if len(tail) == 0 {
			return fmt.Errorf("check command %q %s without output", command, what)
		}
		return fmt.Errorf("check command %q %s; last output:\n%s", command, what, strings.Join(tail, "\n"))
	}
}
