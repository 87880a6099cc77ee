package testenv

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// WithAPIServerArgs adds command-line flags to the cluster's kube-apiserver,
// each as "--name=value" (boolean flags too: "--name=true"), for example an
// audit policy and log:
//
//	testenv.WithAPIServerArgs("--audit-policy-file="+policy, "--audit-log-path="+log)
//
// A flag given more than once is passed more than once. Flags envtest sets
// itself (addresses, certificates, etcd) are best left alone: the cluster's
// clients rely on them.
func WithAPIServerArgs(args ...string) Option {
	return func(o *options) { o.apiServerArgs = append(o.apiServerArgs, args...) }
}

// addAPIServerArgs adds args, as given to WithAPIServerArgs, to the flags
// of apiServer.
func addAPIServerArgs(apiServer *envtest.APIServer, args []string) {
	for _, arg := range args {
		name, value, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		apiServer.Configure().Append(name, value)
	}
}
