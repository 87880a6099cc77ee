package socketprovisioner

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
)

// serve runs Handler(p) on a Unix socket in a new directory and returns a
// Client of it.
func serve(t *testing.T, p clusters.Provisioner) (*Client, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "p.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(p)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c, err := NewClient(Scheme + sock)
	if err != nil {
		t.Fatal(err)
	}
	return c, sock
}

func request(name string) *clustersv1alpha1.ClusterRequest {
	return &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sp-x", Name: name, UID: types.UID("uid-" + name)},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: "mcp"},
	}
}

// TestProvisionAndRelease calls a provisioner through the socket: what the
// provisioner sees and answers crosses unchanged, a pending provisioning
// is nil, and its errors reach the caller with their text.
func TestProvisionAndRelease(t *testing.T) {
	var calls atomic.Int32
	var released atomic.Pointer[clustersv1alpha1.Cluster]
	p := clusters.ProvisionerFns{
		ProvisionFn: func(_ context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
			switch calls.Add(1) {
			case 1:
				return nil, nil // still being created
			case 2:
				return nil, errors.New("no free port for the API server")
			}
			return &clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "marketplane-system", Name: "mcp-" + req.Name, ResourceVersion: "7"}}, nil
		},
		ReleaseFn: func(_ context.Context, req *clustersv1alpha1.ClusterRequest, c *clustersv1alpha1.Cluster) (bool, error) {
			released.Store(c)
			return req.Name == "done", nil
		},
	}
	c, sock := serve(t, p)
	ctx := t.Context()

	got, err := c.Provision(ctx, request("a"))
	if err != nil || got != nil {
		t.Fatalf("Provision while being created = %v, %v; want nil, nil", got, err)
	}
	_, err = c.Provision(ctx, request("a"))
	if err == nil || !strings.Contains(err.Error(), "no free port for the API server") || !strings.Contains(err.Error(), sock) {
		t.Fatalf("Provision failing = %v; want the provisioner's error and the socket", err)
	}
	got, err = c.Provision(ctx, request("a"))
	if err != nil || got == nil || got.Name != "mcp-a" || got.Namespace != "marketplane-system" || got.ResourceVersion != "7" {
		t.Fatalf("Provision granted = %+v, %v; want Cluster marketplane-system/mcp-a at resourceVersion 7", got, err)
	}

	done, err := c.Release(ctx, request("pending"), nil)
	if err != nil || done || released.Load() != nil {
		t.Fatalf("Release without a cluster = %v, %v (provisioner got %v); want false, nil and a nil cluster", done, err, released.Load())
	}
	done, err = c.Release(ctx, request("done"), got)
	if err != nil || !done || released.Load() == nil || released.Load().Name != "mcp-a" {
		t.Fatalf("Release = %v, %v (provisioner got %v); want true and the cluster passed on", done, err, released.Load())
	}
}

// TestBadRequests checks the answers to bodies that are no requests, and
// endpoints the client refuses.
func TestBadRequests(t *testing.T) {
	called := false
	p := clusters.ProvisionerFns{ProvisionFn: func(context.Context, *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
		called = true
		return nil, nil
	}}
	c, _ := serve(t, p)
	for name, body := range map[string]any{
		"no request":        map[string]any{},
		"unnamed request":   provisionRequest{Request: &clustersv1alpha1.ClusterRequest{}},
		"unknown field":     map[string]any{"request": request("a"), "extra": 1},
		"not a JSON object": "provision please",
	} {
		err := c.call(t.Context(), ProvisionPath, body, &provisionResponse{})
		if err == nil || !strings.Contains(err.Error(), "400 Bad Request") {
			t.Errorf("%s: %v; want 400 with a description", name, err)
		}
	}
	if called {
		t.Error("the provisioner was called for a bad body")
	}
	for _, endpoint := range []string{"", "/run/p.sock", "unix://relative.sock", "http://127.0.0.1:1"} {
		if _, err := NewClient(endpoint); err == nil {
			t.Errorf("NewClient(%q) succeeded; want an error", endpoint)
		}
	}
}

// TestListen replaces a socket file nobody serves, refuses one that is
// served and a path that is not a socket, and makes the socket 0600.
func TestListen(t *testing.T) {
	_, sock := serve(t, clusters.ProvisionerFns{})
	if _, err := Listen(sock); !errors.Is(err, errInUse) {
		t.Errorf("Listen on a served socket = %v; want errInUse", err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := Listen(stale)
	if err != nil {
		t.Fatal(err)
	}
	// A crashed server leaves its socket file behind.
	if l, ok := ln.(interface{ SetUnlinkOnClose(bool) }); ok {
		l.SetUnlinkOnClose(false)
	}
	_ = ln.Close()
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the stale socket file is gone already: %v", err)
	}
	ln, err = Listen(stale)
	if err != nil {
		t.Fatalf("Listen on a stale socket = %v; want it replaced", err)
	}
	_ = ln.Close()

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen on a regular file = %v; want an error saying it is not a socket", err)
	}
}
