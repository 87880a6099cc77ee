package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/marketplane/marketplane/bench/internal/landscaperun"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// workspaceGVR is kcp's Workspace, read without kcp's Go modules.
var workspaceGVR = schema.GroupVersionResource{Group: "tenancy.kcp.io", Version: "v1alpha1", Resource: "workspaces"}

// workspaces reads the Workspaces in kcp's root, where the kcp provider
// creates one per Cluster, and tells those the MCPs added from those that
// were there before.
type workspaces struct {
	client dynamic.ResourceInterface
	before map[string]bool
}

// kcpWorkspaces connects to the kcp of the landscape with the admin
// kubeconfig the landscape wrote.
func kcpWorkspaces(l *landscaperun.Landscape) (*workspaces, error) {
	state, err := controlplane.ReadState(l.Dir)
	if err != nil {
		return nil, err
	}
	if state.KCP == nil {
		return nil, fmt.Errorf("state.json of %s records no kcp", l.Dir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", state.KCP.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kcp's admin kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kcp client: %w", err)
	}
	return &workspaces{client: dc.Resource(workspaceGVR)}, nil
}

// names lists the Workspaces' names.
func (w *workspaces) names(ctx context.Context) ([]string, error) {
	list, err := w.client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list kcp Workspaces: %w", err)
	}
	out := make([]string, 0, len(list.Items))
	for _, ws := range list.Items {
		out = append(out, ws.GetName())
	}
	return out, nil
}

// remember records the Workspaces there before the MCPs.
func (w *workspaces) remember(ctx context.Context) error {
	names, err := w.names(ctx)
	if err != nil {
		return err
	}
	w.before = map[string]bool{}
	for _, n := range names {
		w.before[n] = true
	}
	return nil
}

// waitGone waits until no Workspace is left that was not there before.
func (w *workspaces) waitGone(ctx context.Context, timeout time.Duration) error {
	var left []string
	var last error
	err := landscaperun.Poll(ctx, timeout, "the MCPs' kcp Workspaces to be gone", func() (bool, error) {
		names, err := w.names(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		left = slices.DeleteFunc(names, func(n string) bool { return w.before[n] })
		return len(left) == 0, nil
	})
	switch {
	case err != nil && len(left) > 0:
		return fmt.Errorf("%w; %d left: %s", err, len(left), abbreviate(left))
	case err != nil && last != nil:
		return fmt.Errorf("%w; last seen: %w", err, last)
	}
	return err
}
