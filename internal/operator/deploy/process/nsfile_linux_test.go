package process

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/marketplane/marketplane/pkg/supervisor"
)

// canStartIn reports whether the system lets this user start a process in
// the namespaces of attr at all (some CI containers forbid it); the helper
// is only to blame when it can.
func canStartIn(attr *syscall.SysProcAttr) error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = withNamespaces(&syscall.SysProcAttr{}, attr)
	return cmd.Run()
}

// runWrapped runs a shell script as a provider would run: wrapped by the
// helper in the namespaces of attr, with spec's namespace, token and CA.
func runWrapped(t *testing.T, attr *syscall.SysProcAttr, spec nsHelperSpec, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if err := wrapWithNamespaceFile(cmd, spec, attr); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// StartCmd adds the process group and Pdeathsig a deployer gives.
	if err := supervisor.StartCmd(cmd); err != nil {
		t.Fatalf("start the wrapped process: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("wrapped process failed: %v\n%s", err, out.String())
	}
	return out.String()
}

// TestNamespaceHelper runs the helper (this test binary, through its init
// hook) in each kind of namespace and checks that the provider it executes
// reads its namespace where controller-runtime looks, still sees what
// /var/run held, does not leak the helper's marker, and in a user
// namespace has no capabilities; and that the host is left alone.
func TestNamespaceHelper(t *testing.T) {
	_, hostErr := os.Stat(ServiceAccountNamespaceFile)
	attrs := map[string]*syscall.SysProcAttr{"UserNamespace": userNamespaceAttr()}
	if os.Geteuid() == 0 {
		attrs["MountNamespace"] = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	}
	entries, err := os.ReadDir("/var/run/")
	if err != nil {
		t.Fatal(err)
	}
	for name, attr := range attrs {
		t.Run(name, func(t *testing.T) {
			if err := canStartIn(attr); err != nil {
				SkipUnsupportedf(t, "this system does not allow a process in a new %s: %v", name, err)
			}
			if _, err := detectNamespaceFileWith(t.Context(), []*syscall.SysProcAttr{attr}); err != nil {
				t.Fatalf("check mode failed although the system allows the namespaces: %v", err)
			}
			ns := "sp-" + strings.ToLower(name)
			// The token and CA as the deployer keeps them, in the
			// provider's state directory; the token is replaced (by
			// rename) after the process started, as a refresh does.
			dir := t.TempDir()
			token, ca := dir+"/run.token", dir+"/ca.crt"
			for path, data := range map[string]string{token: "old-token", ca: "the-ca"} {
				if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			saDir := filepath.Dir(ServiceAccountNamespaceFile)
			script := `cat ` + ServiceAccountNamespaceFile + `; echo; ls -A /var/run/; echo "marker=${` + nsHelperEnv + `}"; grep CapEff /proc/self/status; ` +
				`echo "ca=$(cat ` + saDir + `/ca.crt)"; echo "token=$(cat ` + saDir + `/token)"; ` +
				`echo new-token > ` + dir + `/next; mv ` + dir + `/next ` + token + `; echo "refreshed=$(cat ` + saDir + `/token)"`
			out := runWrapped(t, attr, nsHelperSpec{Namespace: ns, Token: token, CA: ca}, script)
			lines := strings.Split(out, "\n")
			if lines[0] != ns {
				t.Errorf("namespace file holds %q, want %q; output:\n%s", lines[0], ns, out)
			}
			for _, e := range entries {
				if !strings.Contains(out, "\n"+e.Name()+"\n") {
					t.Errorf("/var/run/%s is missing in the provider's mount namespace; output:\n%s", e.Name(), out)
				}
			}
			if !strings.Contains(out, "marker=\n") {
				t.Errorf("the helper's marker %s reached the provider; output:\n%s", nsHelperEnv, out)
			}
			for _, want := range []string{"ca=the-ca\n", "token=old-token\n", "refreshed=new-token\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("the service account's files are not where in-cluster clients read them: want %q; output:\n%s", want, out)
				}
			}
			if inUserNamespace(attr) && !strings.Contains(out, "CapEff:\t0000000000000000") {
				t.Errorf("the provider has capabilities in its user namespace; output:\n%s", out)
			}
		})
	}
	if _, err := os.Stat(ServiceAccountNamespaceFile); (err == nil) != (hostErr == nil) {
		t.Errorf("%s on the host: existed before %v, after %v", ServiceAccountNamespaceFile, hostErr == nil, err == nil)
	}
}

// TestWrapMissingBinary checks that a binary that cannot be executed fails
// at start, as without the helper, rather than as an exit code of the
// helper.
func TestWrapMissingBinary(t *testing.T) {
	notExecutable := t.TempDir() + "/provider"
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"/nonexistent/provider", notExecutable, t.TempDir()} {
		cmd := exec.Command(bin)
		if err := wrapWithNamespaceFile(cmd, nsHelperSpec{Namespace: "ns"}, userNamespaceAttr()); err == nil {
			t.Errorf("wrapping %s: no error, want one as the file cannot be executed", bin)
		}
	}
}
