// Package socketprovisioner lets the operator use a cluster provider that
// runs in another process: the provider serves a clusters.Provisioner over
// HTTP on a Unix socket (Handler), and the operator calls it through a
// Client, which is itself a clusters.Provisioner.
//
// The local landscape uses it: its cluster provider starts API servers as
// processes of the landscape, while the operator runs as replicas of its
// own (marketplane-operator run --cluster-provisioner=unix://...). A Unix
// socket, not TCP: who may ask for clusters is decided by the socket
// file's permissions (the landscape keeps it in a directory only its user
// can enter), so the protocol needs no credentials of its own.
//
// The protocol is two JSON requests, each answered 200 with a JSON body or
// with an error status and a text/plain description:
//
//	POST /v1/provision  {"request": ClusterRequest}
//	                 -> {"cluster": Cluster}    granted
//	                 -> {}                      still being created; ask again
//	POST /v1/release    {"request": ClusterRequest, "cluster": Cluster|null}
//	                 -> {"done": true|false}
package socketprovisioner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
)

// Scheme is the scheme of a provisioner endpoint: unix:///path/to/socket.
const Scheme = "unix://"

// The protocol's paths.
const (
	ProvisionPath = "/v1/provision"
	ReleasePath   = "/v1/release"
)

// maxBody bounds what either side reads: a ClusterRequest and a Cluster
// are a few KiB.
const maxBody = 1 << 20

// provisionRequest and the types below are the protocol's bodies.
type provisionRequest struct {
	Request *clustersv1alpha1.ClusterRequest `json:"request"`
}

type provisionResponse struct {
	Cluster *clustersv1alpha1.Cluster `json:"cluster,omitempty"`
}

type releaseRequest struct {
	Request *clustersv1alpha1.ClusterRequest `json:"request"`
	Cluster *clustersv1alpha1.Cluster        `json:"cluster"`
}

type releaseResponse struct {
	Done bool `json:"done"`
}

// Handler serves p by the protocol of the package documentation.
func Handler(p clusters.Provisioner) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ProvisionPath, func(w http.ResponseWriter, r *http.Request) {
		var in provisionRequest
		if !decode(w, r, &in) {
			return
		}
		c, err := p.Provision(r.Context(), in.Request)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		encode(w, provisionResponse{Cluster: c})
	})
	mux.HandleFunc("POST "+ReleasePath, func(w http.ResponseWriter, r *http.Request) {
		var in releaseRequest
		if !decode(w, r, &in) {
			return
		}
		done, err := p.Release(r.Context(), in.Request, in.Cluster)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		encode(w, releaseResponse{Done: done})
	})
	return mux
}

// decode reads the body into v, answering 400 when it is not a request
// with a ClusterRequest.
func decode(w http.ResponseWriter, r *http.Request, v interface {
	request() *clustersv1alpha1.ClusterRequest
}) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		http.Error(w, "decode the request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	if req := v.request(); req == nil || req.Name == "" || req.Namespace == "" {
		http.Error(w, "the body has no ClusterRequest with a namespace and a name", http.StatusBadRequest)
		return false
	}
	return true
}

func (r *provisionRequest) request() *clustersv1alpha1.ClusterRequest { return r.Request }
func (r *releaseRequest) request() *clustersv1alpha1.ClusterRequest   { return r.Request }

func encode[T provisionResponse | releaseResponse](w http.ResponseWriter, v T) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// A failed write means the caller is gone; it asks again.
	_, _ = w.Write(data)
}

// Client is a clusters.Provisioner that asks a cluster provider serving
// Handler on a Unix socket.
type Client struct {
	http *http.Client
	path string
}

var _ clusters.Provisioner = (*Client)(nil)

// DefaultTimeout bounds one call: Provision and Release answer at once and
// are asked again while the cluster is being created or removed.
const DefaultTimeout = 30 * time.Second

// NewClient returns a Client of the provider at endpoint, "unix://" and the
// socket's absolute path. Nothing is dialled until the first call.
func NewClient(endpoint string) (*Client, error) {
	path, ok := strings.CutPrefix(endpoint, Scheme)
	if !ok || !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("cluster provisioner endpoint %q: want %s and an absolute socket path", endpoint, Scheme)
	}
	var d net.Dialer
	return &Client{
		path: path,
		http: &http.Client{
			Timeout: DefaultTimeout,
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return d.DialContext(ctx, "unix", path)
				},
				MaxIdleConns: 2,
			},
		},
	}, nil
}

// Provision asks the provider for the cluster of req.
func (c *Client) Provision(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	var out provisionResponse
	if err := c.call(ctx, ProvisionPath, provisionRequest{Request: req}, &out); err != nil {
		return nil, err
	}
	return out.Cluster, nil
}

// Release asks the provider to release what it created for req.
func (c *Client) Release(ctx context.Context, req *clustersv1alpha1.ClusterRequest, cluster *clustersv1alpha1.Cluster) (bool, error) {
	var out releaseResponse
	if err := c.call(ctx, ReleasePath, releaseRequest{Request: req, Cluster: cluster}, &out); err != nil {
		return false, err
	}
	return out.Done, nil
}

func (c *Client) call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("cluster provisioner: encode %s: %w", path, err)
	}
	// The host is ignored: the transport dials the socket.
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://provisioner"+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("cluster provisioner: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("cluster provisioner at %s: %w", c.path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("cluster provisioner at %s: read the answer to %s: %w", c.path, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cluster provisioner at %s: %s answered %s: %s", c.path, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("cluster provisioner at %s: decode the answer to %s: %w", c.path, path, err)
	}
	return nil
}

// Listen creates the Unix socket at path for Handler, replacing a stale
// socket file a crashed server left. The socket file is only connectable
// for the owner (0600); put it in a directory others cannot enter as well.
func Listen(path string) (net.Listener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// errInUse is returned by Listen when a server answers on the socket.
var errInUse = errors.New("a server is listening on it")

func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("socket %s: the path exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("socket %s: %w", path, errInUse)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

func chmod(path string, mode fs.FileMode) error {
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	return nil
}
