// Command domaincheck is the check command the end-to-end tests hand to
// `marketplane validate --check`: it uses a DomainServiceAPI the way a
// tenant does, through the cluster of $KUBECONFIG (the tenant's MCP
// cluster). It creates an object of the kind -resource names, reads it
// back, deletes it and waits until it is gone, so that the provider's
// deletion is not blocked by it, and exits non-zero when any of that
// fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	resource := flag.String("resource", "", "the DomainServiceAPI's kind as KIND.VERSION.GROUP, e.g. SampleObject.v1alpha1.domain.sample.services.openmcp.cloud")
	namespace := flag.String("namespace", "default", "namespace of the object (ignored for cluster-scoped kinds)")
	name := flag.String("name", "domaincheck", "name of the object")
	timeout := flag.Duration("timeout", time.Minute, "how long the check may take")
	served := flag.Duration("served-timeout", 30*time.Second, "how long to wait for the kind to be served")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *resource, *namespace, *name, *served); err != nil {
		fmt.Fprintln(os.Stderr, "domaincheck:", err)
		os.Exit(1)
	}
}

// run waits until the cluster of $KUBECONFIG serves resource, then
// creates, reads and deletes one object of it.
func run(ctx context.Context, resource, namespace, name string, servedTimeout time.Duration) error {
	gvk, _ := schema.ParseKindArg(resource)
	if gvk == nil {
		return fmt.Errorf("-resource %q: want KIND.VERSION.GROUP", resource)
	}
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		return errors.New("KUBECONFIG is not set")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(*gvk)
	obj.SetName(name)
	// An Established CRD can be missing from the API server's discovery
	// for a moment, and a client's REST mapper keeps what it found: try
	// with a new client until the kind is served.
	var (
		c          client.Client
		namespaced bool
		last       error
	)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, servedTimeout, true, func(context.Context) (bool, error) {
		if c, last = client.New(cfg, client.Options{}); last != nil {
			return false, nil
		}
		namespaced, last = c.IsObjectNamespaced(obj)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kind %s is not served by %s after %s: %w", gvk, cfg.Host, servedTimeout, errors.Join(last, err))
	}
	fmt.Printf("%s is served by %s\n", gvk, cfg.Host)
	if namespaced {
		obj.SetNamespace(namespace)
	}
	key := client.ObjectKeyFromObject(obj)
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("create %s %s: %w", gvk.Kind, key, err)
	}
	fmt.Printf("created %s %s\n", gvk.Kind, key)
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(*gvk)
	if err := c.Get(ctx, key, got); err != nil {
		return fmt.Errorf("read %s %s back: %w", gvk.Kind, key, err)
	}
	fmt.Printf("read %s %s (uid %s)\n", gvk.Kind, key, got.GetUID())
	if err := c.Delete(ctx, got); err != nil {
		return fmt.Errorf("delete %s %s: %w", gvk.Kind, key, err)
	}
	// Gone, not just deleting: a provider blocks its own deletion while
	// the tenant has objects of its API.
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, got)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("wait until %s %s is gone: %w", gvk.Kind, key, err)
	}
	fmt.Printf("deleted %s %s\n", gvk.Kind, key)
	return nil
}
