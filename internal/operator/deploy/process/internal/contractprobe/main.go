// Command contractprobe stands in for a provider binary in the process
// deployer's tests. For its init and run subcommands it writes what it
// received (arguments, environment, the identity its kubeconfig
// authenticates as, the service-account namespace file) to
// $PROBE_OUT/<POD_NAME>.<pid>.json; run then stays up until SIGTERM or
// SIGINT. It accepts any flag.
//
// Environment variables make it misbehave:
//
//	PROBE_INIT_EXIT=<code>        init exits with code after printing a few lines
//	PROBE_INIT_FAIL_WHILE=<path>  ... but only while path exists
//	PROBE_RUN_CRASH=1             run exits with code 2 right after its report
//	PROBE_IGNORE_SIGTERM=1        run ignores SIGTERM (needs SIGKILL)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Report is what the probe writes. The tests decode it with their own copy
// of this type.
type Report struct {
	Subcommand string            `json:"subcommand"`
	Args       []string          `json:"args"`
	Env        map[string]string `json:"env"`
	PID        int               `json:"pid"`
	// Username is what the API server says the kubeconfig's user is
	// (SelfSubjectReview); AuthError says why that failed.
	Username  string `json:"username,omitempty"`
	AuthError string `json:"authError,omitempty"`
	// NamespaceFile is the content of the service-account namespace file
	// that controller-runtime reads outside a pod, or "error: ..." when
	// it cannot be read.
	NamespaceFile string `json:"namespaceFile"`
	// InClusterUser is who the API server says the user of client-go's
	// in-cluster configuration is, as a provider without --kubeconfig
	// would connect; InClusterError says why that failed.
	InClusterUser  string `json:"inClusterUser,omitempty"`
	InClusterError string `json:"inClusterError,omitempty"`
}

// namespaceFile is where controller-runtime looks for the namespace of
// leader election when none is configured.
const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: contractprobe init|run [flags]")
		os.Exit(64)
	}
	// Ask for SIGTERM before reporting, so that a test that stops the
	// process right after seeing the report is not racing the handler.
	stop := make(chan os.Signal, 1)
	if os.Getenv("PROBE_IGNORE_SIGTERM") != "" {
		signal.Ignore(syscall.SIGTERM)
		signal.Notify(stop, os.Interrupt)
	} else {
		signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	}

	r := Report{Subcommand: os.Args[1], Args: os.Args[1:], Env: map[string]string{}, PID: os.Getpid()}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		r.Env[k] = v
	}
	r.Username, r.AuthError = whoami(clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG")))
	r.InClusterUser, r.InClusterError = whoami(rest.InClusterConfig())
	if ns, err := os.ReadFile(namespaceFile); err != nil {
		r.NamespaceFile = "error: " + err.Error()
	} else {
		r.NamespaceFile = string(ns)
	}
	if err := write(r); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(70)
	}
	fmt.Printf("probe: %s as %q (pid %d)\n", r.Subcommand, r.Username, r.PID)

	switch r.Subcommand {
	case "init":
		if code := os.Getenv("PROBE_INIT_EXIT"); code != "" && failWhile() {
			n, _ := strconv.Atoi(code)
			fmt.Fprintln(os.Stderr, "probe: installing CRDs")
			fmt.Fprintf(os.Stderr, "probe: init failing as asked with code %d\n", n)
			os.Exit(n)
		}
		fmt.Println("probe: init done")
	case "run":
		if os.Getenv("PROBE_RUN_CRASH") != "" {
			fmt.Fprintln(os.Stderr, "probe: run crashing as asked")
			os.Exit(2)
		}
		sig := <-stop
		fmt.Printf("probe: run stopping on %v\n", sig)
	default:
		fmt.Fprintf(os.Stderr, "probe: unknown subcommand %q\n", r.Subcommand)
		os.Exit(64)
	}
}

func failWhile() bool {
	path := os.Getenv("PROBE_INIT_FAIL_WHILE")
	if path == "" {
		return true
	}
	_, err := os.Stat(path)
	return err == nil
}

// whoami asks the API server who the user of cfg is.
func whoami(cfg *rest.Config, err error) (string, string) {
	if err != nil {
		return "", err.Error()
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err.Error()
	}
	return res.Status.UserInfo.Username, ""
}

// write puts the report into $PROBE_OUT atomically.
func write(r Report) error {
	dir := os.Getenv("PROBE_OUT")
	if dir == "" {
		return fmt.Errorf("PROBE_OUT is not set")
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s.%d.json", r.Env["POD_NAME"], r.PID)
	tmp := filepath.Join(dir, "."+name)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}
