package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestConsoleCommand: `marketplane console --listen 127.0.0.1:0`, pointed
// at a real API server, prints the URL it serves on, answers there, and
// stops cleanly when its context ends.
func TestConsoleCommand(t *testing.T) {
	testenv.SkipIfShort(t)
	env := testenv.Start(t)
	kubeconfig := writeFile(t, t.TempDir(), "kubeconfig", string(env.Kubeconfig), 0o600)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	cmd := NewRootCommand(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"console", "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0", "-v", "DEBUG"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); _ = pw.Close() }()
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(pr).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, pr)
	}()
	var line string
	select {
	case line = <-lines:
	case err := <-done:
		t.Fatalf("console ended before printing its URL: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no URL printed within 30 s")
	}
	const prefix = "Marketplane console: "
	if !strings.HasPrefix(line, prefix+"http://127.0.0.1:") {
		t.Fatalf("printed %q, want %q and a port", line, prefix+"http://127.0.0.1:")
	}
	u := strings.TrimSpace(strings.TrimPrefix(line, prefix))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"login", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %slogin: %v", u, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %slogin: %d", u, resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("console after its context ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("console did not stop within 30 s of its context ending")
	}
}

// TestConsoleOptionsTakeOnlyTheAddress: from a kubeconfig the console takes
// the current context's server and CA; its user's credentials are not read
// (Options has no field that could carry them).
func TestConsoleOptionsTakeOnlyTheAddress(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	const content = `apiVersion: v1
kind: Config
current-context: onb
contexts:
- name: onb
  context: {cluster: onboarding, user: admin}
- name: other
  context: {cluster: other, user: admin}
clusters:
- name: onboarding
  cluster: {server: "https://onboarding.example.invalid:6443", certificate-authority-data: "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"}
- name: other
  cluster: {server: "https://other.example.invalid"}
users:
- name: admin
  user: {token: admin-token-that-must-not-be-used}
`
	if err := os.WriteFile(kc, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := consoleOptions(consoleFlags{kubeconfig: kc}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if opts.Onboarding.Server != "https://onboarding.example.invalid:6443" || !strings.Contains(string(opts.Onboarding.CAData), "BEGIN CERTIFICATE") {
		t.Errorf("onboarding cluster from the kubeconfig: %+v", opts.Onboarding)
	}
	opts, err = consoleOptions(consoleFlags{server: "https://onb.example.invalid", platformKubeconfig: kc}, logr.Discard())
	if err != nil || opts.Platform.Server != "https://onboarding.example.invalid:6443" || opts.Onboarding.Server != "https://onb.example.invalid" {
		t.Errorf("--platform-kubeconfig: %+v, %v", opts, err)
	}
	if _, err := consoleOptions(consoleFlags{kubeconfig: kc, server: "https://x.example.invalid"}, logr.Discard()); err == nil {
		t.Errorf("--kubeconfig with --server: no error")
	}
	if _, err := consoleOptions(consoleFlags{}, logr.Discard()); err == nil {
		t.Errorf("neither --kubeconfig nor --server: no error")
	}
}

// TestConsoleChecksItsServer: the console refuses to start when its
// --server does not answer, or answers as something else than a
// Kubernetes API server, and says what to check; -v takes the levels
// every Marketplane command takes.
func TestConsoleChecksItsServer(t *testing.T) {
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + l.Addr().String()
	_ = l.Close()
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"Closed":        {[]string{"--server", closed, "--server-timeout", "1s"}, "does not answer within 1s"},
		"NotKubernetes": {[]string{"--server", web.URL}, "answers, but not as a Kubernetes API server"},
		"Verbosity":     {[]string{"--server", web.URL, "-v", "1"}, `--verbosity="1": want DEBUG, INFO or ERROR`},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := NewRootCommand(&out)
			cmd.SetErr(io.Discard)
			cmd.SetArgs(append([]string{"console", "--listen", "127.0.0.1:0"}, tc.args...))
			err := cmd.ExecuteContext(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("console %v: %v; want an error with %q", tc.args, err, tc.want)
			}
			if out.Len() > 0 {
				t.Errorf("console %v printed %q before failing; want nothing (it must not listen)", tc.args, out.String())
			}
		})
	}
}
