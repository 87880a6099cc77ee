// Package kubeconfig parses the kubeconfigs that Marketplane reads from
// Secrets (cluster admin kubeconfigs, AccessRequest results, SFCluster
// credentials) safely: credential plugins are refused, because whoever can
// write the Secret could otherwise make the reader run a command of their
// choice, and error messages never quote the (secret) input.
package kubeconfig

import (
	"errors"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Errors Parse returns for input that is not usable.
var (
	// ErrEmpty: there is no kubeconfig at all.
	ErrEmpty = errors.New("empty kubeconfig")
	// ErrUnparsable: the data is not a kubeconfig. The parser's own
	// message is dropped because it may quote the input.
	ErrUnparsable = errors.New("not a kubeconfig")
	// ErrNoServer: the current context names no server.
	ErrNoServer = errors.New("the kubeconfig names no server")
	// ErrPlugin: the kubeconfig uses an exec or auth-provider plugin.
	ErrPlugin = errors.New("credential plugins (exec, auth-provider) are not supported")
)

// Parse returns the REST config of data's current context.
func Parse(data []byte) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, ErrEmpty
	}
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, ErrUnparsable
	}
	for _, user := range raw.AuthInfos {
		if user.Exec != nil || user.AuthProvider != nil {
			return nil, ErrPlugin
		}
	}
	if ctx, ok := raw.Contexts[raw.CurrentContext]; ok {
		if cluster, ok := raw.Clusters[ctx.Cluster]; ok && cluster.Server == "" {
			return nil, ErrNoServer
		}
	}
	// Validation messages name contexts, clusters and files, never
	// credentials, so they can be passed on.
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Host == "":
		return nil, ErrNoServer
	case cfg.ExecProvider != nil, cfg.AuthProvider != nil:
		return nil, ErrPlugin
	}
	return cfg, nil
}
