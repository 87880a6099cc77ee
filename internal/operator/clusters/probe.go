package clusters

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// Prober checks whether a cluster's API server answers and returns its
// version.
type Prober interface {
	// Probe calls the API server behind cfg and returns its version.
	Probe(ctx context.Context, cfg *rest.Config) (*version.Info, error)
}

// ProberFn adapts a function to a Prober.
type ProberFn func(ctx context.Context, cfg *rest.Config) (*version.Info, error)

// Probe calls f.
func (f ProberFn) Probe(ctx context.Context, cfg *rest.Config) (*version.Info, error) {
	return f(ctx, cfg)
}

// VersionProber is the default Prober: GET /version with a timeout.
type VersionProber struct {
	// Timeout bounds the request; zero means DefaultProbeTimeout.
	Timeout time.Duration
}

// Probe implements Prober.
func (p VersionProber) Probe(ctx context.Context, cfg *rest.Config) (*version.Info, error) {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	info := &version.Info{}
	if err := json.Unmarshal(body, info); err != nil {
		return nil, fmt.Errorf("decode /version: %w", err)
	}
	return info, nil
}

// versionLabelValue turns a git version such as "v1.36.3" or
// "v1.36.3+k3s1" into a label value ("1.36.3"); it returns "" when the
// version cannot be parsed.
func versionLabelValue(gitVersion string) string {
	v, err := utilversion.ParseGeneric(strings.TrimSpace(gitVersion))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch())
}
