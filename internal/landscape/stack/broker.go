package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// BrokerCredentialsFile is the file in the state directory that holds the
// broker's URL and basic-auth credentials (mode 0600); BrokerEnvFile holds
// the same as shell variables (BROKER_URL, BROKER_USER, BROKER_PASSWORD) for
// `. .landscape/broker.env`.
const (
	BrokerCredentialsFile = "broker.json"
	BrokerEnvFile         = "broker.env"
)

// BrokerInfo is the content of BrokerCredentialsFile.
type BrokerInfo struct {
	URL      string `json:"url"`
	Username string `json:"username"`
	Password string `json:"password"`
}

const brokerSecret = "broker-credentials"

// BrokerAccessNamespace is the broker's namespace on the platform cluster
// for the AccessRequests of bindings of code-based offerings
// (--code-offerings-namespace).
const BrokerAccessNamespace = "broker-access"

// startBroker starts marketplane-broker on a loopback port with generated
// credentials (kept in a Secret on the platform cluster, which the broker
// reads, and in broker.json for the user), and waits until it serves the
// catalog. A resumed landscape reuses port and credentials (a new port
// when the recorded one is taken).
func startBroker(ctx context.Context, l *landscape.Landscape, timeout time.Duration) error {
	info, err := brokerInfo(l)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: brokerSecret, Namespace: landscape.Namespace}}
	if err := ensure(ctx, l.Platform.Client, secret, func() {
		secret.StringData = map[string]string{"username": info.Username, "password": info.Password}
	}); err != nil {
		return err
	}
	access := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: BrokerAccessNamespace}}
	if err := ensure(ctx, l.Platform.Client, access, func() {}); err != nil {
		return err
	}
	binary := filepath.Join(l.Binaries.Dir, "marketplane-broker")
	addr := info.URL[len("http://"):]
	proc, err := l.StartProcess("broker", binary, []string{
		"--kubeconfig=" + l.Platform.KubeconfigPath,
		"--onboarding-kubeconfig=" + l.Onboarding.KubeconfigPath,
		"--catalog-namespace=" + CatalogNamespace,
		"--bind-address=" + addr,
		"--metrics-bind-address=0",
		"--credentials-secret=" + landscape.Namespace + "/" + brokerSecret,
		"--code-offerings-namespace=" + BrokerAccessNamespace,
	})
	if err != nil {
		return fmt.Errorf("start the broker: %w", err)
	}
	if err := l.SetEndpoint("broker", info.URL); err != nil {
		return err
	}
	if err := waitServing(ctx, timeout, "the broker's catalog", info.URL+"/v2/catalog", proc, func(req *http.Request) {
		req.SetBasicAuth(info.Username, info.Password)
		req.Header.Set("X-Broker-API-Version", "2.17")
	}); err != nil {
		return err
	}
	l.AddSummary(
		"OSB broker: "+info.URL+" (basic auth; URL, username and password in "+l.Layout.Path(BrokerEnvFile)+")",
		"  . "+l.Layout.Path(BrokerEnvFile)+" && curl -u \"$BROKER_USER:$BROKER_PASSWORD\" -H 'X-Broker-API-Version: 2.17' $BROKER_URL/v2/catalog",
	)
	return nil
}

// brokerInfo reads broker.json, or creates it with a free port and random
// credentials. A recorded port that another process took while the
// landscape was stopped is replaced by a free one: broker.json and
// broker.env are rewritten and the summary says so.
func brokerInfo(l *landscape.Landscape) (BrokerInfo, error) {
	path := l.Layout.Path(BrokerCredentialsFile)
	var info BrokerInfo
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &info); err != nil {
			return info, fmt.Errorf("read %s: %w", path, err)
		}
		moved, err := keepOrMove(l, "broker", info.URL, path, "; "+l.Layout.Path(BrokerEnvFile)+" has the new URL")
		if err != nil || moved == info.URL {
			return info, err
		}
		info.URL = moved
		return info, writeBrokerInfo(l, info)
	case !errors.Is(err, os.ErrNotExist):
		return info, fmt.Errorf("read %s: %w", path, err)
	}
	freeURL, err := loopbackURL()
	if err != nil {
		return info, err
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return info, fmt.Errorf("generate broker password: %w", err)
	}
	info = BrokerInfo{URL: freeURL, Username: "marketplane", Password: hex.EncodeToString(secret)}
	return info, writeBrokerInfo(l, info)
}

// writeBrokerInfo writes broker.json and broker.env (mode 0600).
func writeBrokerInfo(l *landscape.Landscape, info BrokerInfo) error {
	raw, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	path := l.Layout.Path(BrokerCredentialsFile)
	if err := os.WriteFile(path, append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	env := fmt.Sprintf("BROKER_URL=%s\nBROKER_USER=%s\nBROKER_PASSWORD=%s\n", info.URL, info.Username, info.Password)
	if err := os.WriteFile(l.Layout.Path(BrokerEnvFile), []byte(env), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", BrokerEnvFile, err)
	}
	return nil
}

// keepOrMove returns recorded, the URL (http://127.0.0.1:<port>) that the
// state file path records for the landscape's process what, while its port
// is free; else the URL of a free port, which the log and the summary
// (with note appended) announce. The caller records the new URL.
func keepOrMove(l *landscape.Landscape, what, recorded, path, note string) (string, error) {
	u, err := url.Parse(recorded)
	if err != nil {
		return "", fmt.Errorf("read %s: url: %w", path, err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return "", fmt.Errorf("read %s: url %q has no port: %w", path, recorded, err)
	}
	if controlplane.CheckPortFree(port, what) == nil {
		return recorded, nil
	}
	moved, err := loopbackURL()
	if err != nil {
		return "", err
	}
	l.Logger().Info("A recorded port is taken by another process; moving "+what, "from", recorded, "to", moved)
	l.AddSummary(fmt.Sprintf("The %s moved from %s (taken by another process) to %s%s.", what, recorded, moved, note))
	return moved, nil
}

// loopbackURL returns the URL of a free loopback port.
func loopbackURL() (string, error) {
	port, err := controlplane.FreePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port), nil
}
