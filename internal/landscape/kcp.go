package landscape

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/freeport"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/pki"
	"github.com/marketplane/marketplane/internal/operator/app"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// The backends that serve the clusters of ManagedControlPlanes (`landscape
// up --mcp-backend`).
const (
	// BackendAPIServer gives every MCP a kube-apiserver of its own,
	// started by the local cluster provider (the default).
	BackendAPIServer = "apiserver"
	// BackendKCP gives every MCP a workspace of one kcp server, created by
	// the kcp ClusterProvider.
	BackendKCP = "kcp"
)

// MCPBackends are the values of --mcp-backend.
var MCPBackends = []string{BackendAPIServer, BackendKCP}

// ParseMCPBackend checks a --mcp-backend value; "" is BackendAPIServer.
func ParseMCPBackend(s string) (string, error) {
	if s == "" {
		return BackendAPIServer, nil
	}
	if !slices.Contains(MCPBackends, s) {
		return "", fmt.Errorf("--mcp-backend %q: want one of %s (%s: a kube-apiserver per MCP, the default; %s: a kcp workspace per MCP)",
			s, strings.Join(MCPBackends, ", "), BackendAPIServer, BackendKCP)
	}
	return s, nil
}

// Names of the kcp backend.
const (
	// KCPBinary is kcp's executable in the binary directory (`make
	// tools` builds it).
	KCPBinary = "kcp"
	// KCPProcess names the kcp server in logs/ and status.
	KCPProcess = "kcp"
	// KCPProviderBinary is the kcp ClusterProvider's executable (`make
	// build`); its image is Image(KCPProviderBinary).
	KCPProviderBinary = "marketplane-kcp-provider"
	// KCPProvider names the ClusterProvider, KCPProfile the
	// ClusterProfile (and the ProviderConfig it names, which the provider
	// does not read).
	KCPProvider = "kcp"
	KCPProfile  = "kcp"
	// KCPKubeconfigEnv is the provider's setting of kcp's admin
	// kubeconfig.
	KCPKubeconfigEnv = "KCP_KUBECONFIG"
	// KCPAdminUser is the landscape's own kcp user, of KCPAdminGroup,
	// whose token stays the same across restarts of kcp (the token of
	// kcp's own admin.kubeconfig changes at every start).
	KCPAdminUser = "marketplane-admin"
	// KCPAdminGroup is the group of kcp's own admin user. Not
	// system:masters: kcp records no owner for a workspace such a user
	// creates, and the workspace then never finishes initializing.
	KCPAdminGroup = "system:kcp:admin"
	// KCPKubernetesVersion is the Kubernetes version ClusterProfile kcp
	// offers: the one kcp v0.28 serves in its workspaces.
	KCPKubernetesVersion = "1.32.3"
)

// kcpDefaultPorts are kcp's default ports, never given to a landscape's
// kcp: another kcp or Kubernetes on the machine may want them.
var kcpDefaultPorts = []int{6443, 2379, 2380}

// KCPDir is kcp's --root-directory in the state directory.
func (l *Landscape) KCPDir() string { return l.Layout.Path("kcp") }

// KCPKubeconfig is the landscape's admin kubeconfig of kcp (context
// root, server .../clusters/root), the provider's KCP_KUBECONFIG.
func (l *Landscape) KCPKubeconfig() string { return l.Layout.Kubeconfig(KCPProcess) }

// kcpTokenFile is kcp's --token-auth-file with the KCPAdminUser.
func (l *Landscape) kcpTokenFile() string { return l.Layout.Path("pki", "kcp-tokens.csv") }

// MCPBackend returns the backend of the landscape's MCPs, once Start has
// read its state.
func (l *Landscape) MCPBackend() string { return l.backend }

// chooseBackend sets the backend of s: the one asked for, else the
// recorded one, else BackendAPIServer. A resumed landscape cannot change
// it: its MCPs live on the recorded one (a landscape recorded before the
// backend was, resumed, had kube-apiservers). A kcp backend gets its
// ports.
func (l *Landscape) chooseBackend(s *controlplane.State, resumed bool) error {
	recorded := s.MCPBackend
	if recorded == "" && resumed {
		recorded = BackendAPIServer
	}
	backend := l.cfg.MCPBackend
	switch {
	case backend == "" && recorded != "":
		backend = recorded
	case backend == "":
		backend = BackendAPIServer
	case recorded != "" && recorded != backend:
		return fmt.Errorf("the landscape in %s serves its MCPs with the %s backend; it cannot change to %s ('marketplane landscape down' removes it, then 'up --mcp-backend %s')",
			l.Layout.Dir, recorded, backend, backend)
	}
	if backend == BackendKCP {
		if err := kcpBinaries(l.Binaries.Dir); err != nil {
			return err
		}
		if s.KCP == nil {
			ports, err := kcpPorts(s)
			if err != nil {
				return err
			}
			s.KCP = &controlplane.KCP{SecurePort: ports[0], EtcdClientPort: ports[1], EtcdPeerPort: ports[2],
				RootDir: l.KCPDir(), Kubeconfig: l.KCPKubeconfig()}
		}
	}
	s.MCPBackend = backend
	l.backend = backend
	return nil
}

// kcpBinaries checks that kcp and its ClusterProvider are in dir.
func kcpBinaries(dir string) error {
	for _, b := range []struct{ name, make string }{{KCPBinary, "make tools"}, {KCPProviderBinary, "make build"}} {
		path := filepath.Join(dir, b.name)
		if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("--mcp-backend %s needs %s, not found or not executable (run '%s'): %w", BackendKCP, path, b.make, controlplane.ErrBinaryMissing)
		}
	}
	return nil
}

// kcpPorts picks three free loopback ports for kcp, none of kcp's
// defaults and none s records.
func kcpPorts(s *controlplane.State) ([]int, error) {
	taken := s.Ports()
	var out []int
	for range 3 {
		p, err := freeport.Pick("127.0.0.1", func(p int) bool {
			_, recorded := taken[p]
			return recorded || slices.Contains(out, p) || slices.Contains(kcpDefaultPorts, p)
		})
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port for kcp: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// startKCP starts kcp on its recorded ports and data; waitKCP waits until
// it is ready. Its ports are not moved when taken (the URLs of its
// workspaces, in its data and in the Clusters' kubeconfigs, name its
// port): the start fails and says which.
func (l *Landscape) startKCP() error {
	rec := l.store.Snapshot().KCP
	for port, use := range map[int]string{rec.SecurePort: "kcp secure port", rec.EtcdClientPort: "kcp's etcd client port", rec.EtcdPeerPort: "kcp's etcd peer port"} {
		if err := controlplane.CheckPortFree(port, use); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(rec.RootDir, 0o700); err != nil {
		return fmt.Errorf("kcp: %w", err)
	}
	if err := ensureKCPToken(l.kcpTokenFile()); err != nil {
		return err
	}
	args := []string{"start",
		"--root-directory=" + rec.RootDir,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(rec.SecurePort),
		"--embedded-etcd-client-port=" + strconv.Itoa(rec.EtcdClientPort),
		"--embedded-etcd-peer-port=" + strconv.Itoa(rec.EtcdPeerPort),
		"--token-auth-file=" + l.kcpTokenFile(),
	}
	p, err := l.cp.Runner().Start(KCPProcess, filepath.Join(l.Binaries.Dir, KCPBinary), args, l.Layout.Log(KCPProcess))
	if err != nil {
		return fmt.Errorf("kcp: %w", err)
	}
	l.kcp = p
	return l.store.Update(func(s *controlplane.State) error {
		procRec := p.Record // a copy: the Runner updates the stored one on restarts
		s.KCP.Process = &procRec
		return nil
	})
}

// ensureKCPToken writes kcp's token file with a new random token for
// KCPAdminUser, unless it exists.
func ensureKCPToken(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kcp token file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("kcp token file: %w", err)
	}
	line := fmt.Sprintf("%s,%s,%s,%q\n", rand.Text(), KCPAdminUser, KCPAdminUser, KCPAdminGroup)
	return pki.WriteFileAtomic(path, []byte(line), 0o600)
}

// kcpToken reads the token of KCPAdminUser.
func kcpToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("kcp token file: %w", err)
	}
	token, _, _ := strings.Cut(string(data), ",")
	return token, nil
}

// kcpReadyzTimeout bounds one /readyz request to kcp.
const kcpReadyzTimeout = 15 * time.Second

// waitKCP waits until kcp has written its admin.kubeconfig (its CA) and
// answers /readyz, then writes the landscape's kubeconfig of kcp
// (KCPKubeconfig) with the KCPAdminUser's token.
func (l *Landscape) waitKCP(ctx context.Context) error {
	rec := l.store.Snapshot().KCP
	token, err := kcpToken(l.kcpTokenFile())
	if err != nil {
		return err
	}
	base := "https://127.0.0.1:" + strconv.Itoa(rec.SecurePort)
	var last error
	err = l.cp.Poll(ctx, "kcp", l.kcp, func(ctx context.Context) (bool, error) {
		ca, err := kcpCA(filepath.Join(rec.RootDir, "admin.kubeconfig"))
		if err != nil {
			last = err
			return false, nil
		}
		hc, err := rest.HTTPClientFor(&rest.Config{Host: base, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
		if err != nil {
			return false, fmt.Errorf("kcp: HTTP client: %w", err)
		}
		hc.Timeout = kcpReadyzTimeout
		if err := controlplane.Readyz(ctx, hc, base); err != nil {
			if ctx.Err() == nil {
				last = err
			}
			return false, nil
		}
		return true, writeKCPKubeconfig(rec.Kubeconfig, base+"/clusters/root", ca, token)
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w\nlast seen: %w", err, last)
	}
	return err
}

// kcpCA returns the CA of the server in kcp's admin kubeconfig.
func kcpCA(path string) ([]byte, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("kcp's admin kubeconfig (written at its start): %w", err)
	}
	for _, c := range cfg.Clusters {
		if len(c.CertificateAuthorityData) > 0 {
			return c.CertificateAuthorityData, nil
		}
	}
	return nil, fmt.Errorf("kcp's admin kubeconfig %s names no CA", path)
}

// writeKCPKubeconfig writes the landscape's admin kubeconfig of kcp.
func writeKCPKubeconfig(path, server string, ca []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["root"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[KCPAdminUser] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["root"] = &clientcmdapi.Context{Cluster: "root", AuthInfo: KCPAdminUser}
	cfg.CurrentContext = "root"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode kcp's kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("kcp's kubeconfig: %w", err)
	}
	return pki.WriteFileAtomic(path, data, 0o600)
}

// stopKCP stops kcp and clears its process record; its data stays.
func (l *Landscape) stopKCP() error {
	if l.kcp == nil {
		return nil
	}
	l.kcp.Stop(l.cfg.StopTimeout)
	return l.store.Update(func(s *controlplane.State) error {
		if s.KCP != nil {
			s.KCP.Process = nil
		}
		return nil
	})
}

// registerKCP creates (or updates) the ClusterProvider kcp, which the
// operator deploys like any provider (its image maps to
// bin/marketplane-kcp-provider), and the ClusterProfile kcp that the
// operator's --cluster-profile mcp=kcp names. The profile's
// providerConfigRef names a ProviderConfig kcp that does not exist: the
// provider reads none. The provider needs no rights beyond the run role the
// operator gives every ClusterProvider: the profile's Clusters are in its
// own namespace.
func (l *Landscape) registerKCP(ctx context.Context) error {
	c := client.WithFieldOwner(l.Platform.Client, app.FieldOwner)
	cp := &providerv1alpha1.ClusterProvider{ObjectMeta: metav1.ObjectMeta{Name: KCPProvider}}
	if err := createOrUpdate(ctx, c, cp, func() {
		cp.Spec.Image = Image(KCPProviderBinary)
		cp.Spec.Env = []providerv1alpha1.EnvVar{{Name: KCPKubeconfigEnv, Value: l.KCPKubeconfig()}}
		// Nothing scrapes a landscape's providers; a fixed port could be
		// taken.
		cp.Spec.Metrics = &providerv1alpha1.MetricsConfiguration{Disabled: true}
	}); err != nil {
		return err
	}
	profile := &clustersv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: KCPProfile}}
	if err := createOrUpdate(ctx, c, profile, func() {
		profile.Spec = clustersv1alpha1.ClusterProfileSpec{
			ProviderRef:       common.LocalObjectReference{Name: KCPProvider},
			ProviderConfigRef: common.LocalObjectReference{Name: KCPProfile},
			SupportedVersions: []clustersv1alpha1.SupportedK8sVersion{{Version: KCPKubernetesVersion}},
		}
	}); err != nil {
		return err
	}
	return nil
}

// waitKCPProvider waits until the operator reports the ClusterProvider kcp
// Ready: then MCPs get workspaces.
func (l *Landscape) waitKCPProvider(ctx context.Context) error {
	cp := &providerv1alpha1.ClusterProvider{}
	var seen string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, l.cfg.StartTimeout, true, func(ctx context.Context) (bool, error) {
		if err := l.operator.failed(); err != nil {
			return false, err
		}
		if err := l.Platform.Client.Get(ctx, client.ObjectKey{Name: KCPProvider}, cp); err != nil {
			seen = err.Error()
			return false, nil
		}
		seen = fmt.Sprintf("conditions %+v", cp.Status.Conditions)
		return apimeta.IsStatusConditionTrue(cp.Status.Conditions, string(providerv1alpha1.ConditionReady)), nil
	})
	if err != nil && ctx.Err() == nil {
		dir := filepath.Join(l.OperatorStateDir(), "clusterprovider-"+KCPProvider)
		return fmt.Errorf("waiting for the operator to report ClusterProvider %s Ready: not within %s; last seen: %s; last lines of %s:\n%s",
			KCPProvider, l.cfg.StartTimeout, seen, filepath.Join(dir, "run-0.log"), supervisor.LogTail(filepath.Join(dir, "run-0.log"), 10))
	}
	return err
}

// kcpReadyz is how status asks kcp for /readyz: with the landscape's
// kubeconfig of kcp, at the server's root.
func kcpReadyz(ctx context.Context, rec *controlplane.KCP) string {
	return readyzAt(ctx, rec.Kubeconfig, "https://127.0.0.1:"+strconv.Itoa(rec.SecurePort))
}

// createOrUpdate creates obj after mutate, or applies mutate to the existing
// one and updates it when that changed it: a resumed landscape finds its
// objects there.
func createOrUpdate(ctx context.Context, c client.Client, obj client.Object, mutate func()) error {
	if _, err := controllerutil.CreateOrUpdate(ctx, c, obj, func() error { mutate(); return nil }); err != nil {
		return fmt.Errorf("create or update %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}
