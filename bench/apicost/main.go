// Command apicost measures what one API request of each kind the
// provisioning path sends costs the API server: the kube-apiserver's CPU
// time per request, read from /proc before and after -n requests of the
// kind sent by -workers goroutines to an API server of its own
// (pkg/testenv, production profile). The kinds are the writes of one
// instance — the broker's create, the provisioner's spec patch, its apply
// of the rendered object and its status write — and their alternatives,
// so that a change to the provisioning path can be judged by what it saves
// the API server before the whole benchmark runs.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./bench/apicost -n 2000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/bench/internal/brokerobj"
	"github.com/marketplane/marketplane/bench/internal/parallel"
	"github.com/marketplane/marketplane/bench/internal/procstat"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// config is what the flags set.
type config struct {
	n, workers int
	// only measures only the kinds whose name contains it; profile
	// profiles the API server while the first kind whose name contains it
	// is sent.
	only, profile string
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 2000, "requests of each kind")
	flag.IntVar(&c.workers, "workers", 8, "goroutines sending them")
	flag.StringVar(&c.only, "only", "", "measure only the kinds whose name contains this")
	flag.StringVar(&c.profile, "profile", "", "write a CPU profile of the kube-apiserver (5 s) to apiserver.prof while the first kind whose name contains this is sent")
	flag.Parse()
	klog.SetLogger(logr.Discard())
	ctrl.SetLogger(logr.Discard())
	if err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/apicost:", err)
		os.Exit(2)
	}
}

// kind is one kind of request: prepare readies object i (untimed), send
// sends the request for it (timed).
type kind struct {
	name    string
	prepare func(ctx context.Context, i int) error
	send    func(ctx context.Context, i int) error
}

func run(ctx context.Context, c config, out io.Writer) error {
	cl, err := testenv.New(testenv.WithFullAPI(), testenv.WithName("apicost"))
	if err != nil {
		return err
	}
	defer func() { _ = cl.Stop() }()
	for _, ns := range []string{"cm", "si"} {
		if err := cl.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	fmt.Fprintf(out, "bench/apicost: %d requests of each kind by %d goroutines on one API server (production profile); load average %.2f\n", c.n, c.workers, procstat.LoadAverage())
	fmt.Fprintf(out, "%-62s %10s %10s\n", "kind", "apiserver", "etcd")
	fmt.Fprintf(out, "%-62s %10s %10s\n", "", "ms/request", "ms/request")
	m := &meter{c: c, cfg: cl.Config, out: out}
	for _, k := range kinds(cl.Client) {
		if err := m.measure(ctx, k, ""); err != nil {
			return err
		}
	}
	// CEL: the instance kinds again without the CRD's x-kubernetes-validations,
	// then with them restored, so that the growing store does not pass
	// for their cost.
	for _, rules := range []bool{false, true} {
		if err := setCEL(ctx, cl.Client, rules); err != nil {
			return err
		}
		suffix := " (CRD without CEL rules)"
		if rules {
			suffix = " (CEL rules restored)"
		}
		for _, k := range kinds(cl.Client) {
			if !strings.HasPrefix(k.name, "instance") {
				continue
			}
			if err := m.measure(ctx, k, suffix); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "load average at the end: %.2f\n", procstat.LoadAverage())
	return nil
}

// meter measures kinds of requests.
type meter struct {
	c   config
	cfg *rest.Config
	out io.Writer
}

// measure sends n requests of k and prints the API server's and etcd's CPU
// per request; suffix is added to k's name.
func (m *meter) measure(ctx context.Context, k kind, suffix string) error {
	name := k.name + suffix
	if !strings.Contains(name, m.c.only) {
		return nil
	}
	if k.prepare != nil {
		if _, err := parallel.Run(ctx, m.c.workers, m.c.n, k.prepare); err != nil {
			return fmt.Errorf("%s: prepare: %w", name, err)
		}
	}
	var profiled chan error
	if m.c.profile != "" && strings.Contains(name, m.c.profile) {
		m.c.profile = ""
		profiled = make(chan error, 1)
		go func() { profiled <- profile(ctx, m.cfg, 5) }()
	}
	before := procstat.ChildrenCPU(os.Getpid())
	if _, err := parallel.Run(ctx, m.c.workers, m.c.n, k.send); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	after := procstat.ChildrenCPU(os.Getpid())
	if profiled != nil {
		if err := <-profiled; err != nil {
			return err
		}
	}
	per := func(p string) float64 { return (after[p] - before[p]) * 1000 / float64(m.c.n) }
	fmt.Fprintf(m.out, "%-62s %10.2f %10.2f\n", name, per("kube-apiserver"), per("etcd"))
	return nil
}

var round atomic.Int64

// kinds are the requests measured, each on fresh names.
func kinds(cl client.Client) []kind {
	r := round.Add(1)
	cm := func(prefix string, i int) string { return fmt.Sprintf("%s-%d-%05d", prefix, r, i) }
	data := func(i int) map[string]string {
		return map[string]string{"instanceId": fmt.Sprintf("id-%05d", i), "plan": "one-configmap"}
	}
	inst := func(prefix string, i int) *osbv1alpha1.SFServiceInstance {
		return instance(client.ObjectKey{Namespace: "si", Name: cm(prefix, i)})
	}
	// created is a kind that writes to an instance created and read
	// beforehand.
	created := func(name string, write func(context.Context, *osbv1alpha1.SFServiceInstance) error) kind {
		prefix := fmt.Sprintf("k%d", len(name))
		objs := make(map[int]*osbv1alpha1.SFServiceInstance)
		var mu sync.Mutex
		return kind{name: name, prepare: func(ctx context.Context, i int) error {
			o := inst(prefix+strconv.Itoa(int(round.Add(1))), i)
			if err := cl.Create(ctx, o); err != nil {
				return err
			}
			mu.Lock()
			objs[i] = o
			mu.Unlock()
			return nil
		}, send: func(ctx context.Context, i int) error {
			mu.Lock()
			o := objs[i]
			mu.Unlock()
			return write(ctx, o)
		}}
	}
	return []kind{
		{name: "ConfigMap create (protobuf)", send: func(ctx context.Context, i int) error {
			return cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cm", Name: cm("pb", i)}, Data: data(i)})
		}},
		{name: "ConfigMap create (JSON, unstructured)", send: func(ctx context.Context, i int) error {
			return cl.Create(ctx, unstructuredConfigMap(cm("json", i), data(i)))
		}},
		{name: "ConfigMap server-side apply, new object", send: func(ctx context.Context, i int) error {
			return cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(unstructuredConfigMap(cm("ssa", i), data(i))),
				client.FieldOwner("apicost"), client.ForceOwnership)
		}},
		{name: "ConfigMap server-side apply, unchanged", prepare: func(ctx context.Context, i int) error {
			return cl.Create(ctx, unstructuredConfigMap(cm("ssa2", i), data(i)), client.FieldOwner("apicost"))
		}, send: func(ctx context.Context, i int) error {
			return cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(unstructuredConfigMap(cm("ssa2", i), data(i))),
				client.FieldOwner("apicost"), client.ForceOwnership)
		}},
		{name: "ConfigMap GET", prepare: func(ctx context.Context, i int) error {
			return cl.Create(ctx, unstructuredConfigMap(cm("get", i), data(i)))
		}, send: func(ctx context.Context, i int) error {
			return cl.Get(ctx, client.ObjectKey{Namespace: "cm", Name: cm("get", i)}, unstructuredConfigMap(cm("get", i), nil))
		}},
		{name: "ConfigMap GET resourceVersion=0 (watch cache)", prepare: func(ctx context.Context, i int) error {
			return cl.Create(ctx, unstructuredConfigMap(cm("get0", i), data(i)))
		}, send: func(ctx context.Context, i int) error {
			u := unstructuredConfigMap(cm("get0", i), nil)
			return cl.Get(ctx, client.ObjectKey{Namespace: "cm", Name: cm("get0", i)}, u, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
		}},
		{name: "ConfigMap GET metadata only", prepare: func(ctx context.Context, i int) error {
			return cl.Create(ctx, unstructuredConfigMap(cm("getm", i), data(i)))
		}, send: func(ctx context.Context, i int) error {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			return cl.Get(ctx, client.ObjectKey{Namespace: "cm", Name: cm("getm", i)}, m)
		}},
		{name: "instance create (the broker's)", send: func(ctx context.Context, i int) error {
			return cl.Create(ctx, inst("a", i))
		}},
		created("instance spec merge patch (finalizer, clusterId; locked)", func(ctx context.Context, o *osbv1alpha1.SFServiceInstance) error {
			base := o.DeepCopy()
			o.Finalizers = append(o.Finalizers, osbv1alpha1.FinalizerProvisioner)
			o.Spec.ClusterID = "target"
			return cl.Patch(ctx, o, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		}),
		created("instance metadata merge patch (one annotation)", func(ctx context.Context, o *osbv1alpha1.SFServiceInstance) error {
			return cl.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"a":"b"}}}`)))
		}),
		created("instance status merge patch (succeeded, full status)", func(ctx context.Context, o *osbv1alpha1.SFServiceInstance) error {
			base := o.DeepCopy()
			succeed(o, true)
			return cl.Status().Patch(ctx, o, client.MergeFrom(base))
		}),
		created("instance status merge patch (succeeded, no appliedSpec)", func(ctx context.Context, o *osbv1alpha1.SFServiceInstance) error {
			base := o.DeepCopy()
			succeed(o, false)
			return cl.Status().Patch(ctx, o, client.MergeFrom(base))
		}),
		created("instance status merge patch (state only)", func(ctx context.Context, o *osbv1alpha1.SFServiceInstance) error {
			return cl.Status().Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"status":{"state":"succeeded"}}`)))
		}),
		created("instance status update (PUT, full status)", func(ctx context.Context, o *osbv1alpha1.SFServiceInstance) error {
			succeed(o, true)
			return cl.Status().Update(ctx, o)
		}),
	}
}

// instance is the SFServiceInstance the broker creates, named key.Name.
func instance(key client.ObjectKey) *osbv1alpha1.SFServiceInstance {
	return brokerobj.Instance(key, key.Name, "0f4c9c1e-8a52-4f0e-b7a1-6d3e2c1b0a91", "7e2d4b6a-1c3f-4a5e-9b8d-2f0e1d3c5b7a")
}

// succeed sets the status the provisioner writes for a succeeded
// one-ConfigMap instance.
func succeed(o *osbv1alpha1.SFServiceInstance, applied bool) {
	o.Status.State = osbv1alpha1.StateSucceeded
	o.Status.ObservedGeneration = o.Generation
	o.Status.Resources = []osbv1alpha1.Source{{APIVersion: "v1", Kind: "ConfigMap", Name: "sf-" + o.Name, Namespace: o.Namespace}}
	if applied {
		o.Status.AppliedSpec = o.Spec.DeepCopy()
	}
	spruntime.StatusReady(o)
}

// unstructuredConfigMap is the ConfigMap name in namespace cm, as a
// rendered object.
func unstructuredConfigMap(name string, data map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("cm")
	u.SetName(name)
	d := map[string]any{}
	for k, v := range data {
		d[k] = v
	}
	u.Object["data"] = d
	return u
}

// celState holds the instances' CRD as the API server first served it.
var celState struct {
	original *apiextensionsv1.CustomResourceDefinition
	probes   int
}

// setCEL serves the instances' CRD with its x-kubernetes-validations
// (rules) or without them, and waits until the API server enforces the
// change: the rule that keeps serviceId immutable refuses a changed one.
func setCEL(ctx context.Context, cl client.Client, rules bool) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := cl.Get(ctx, client.ObjectKey{Name: "sfserviceinstances.osb.servicefabrik.io"}, crd); err != nil {
		return fmt.Errorf("get the instances' CRD: %w", err)
	}
	if celState.original == nil {
		celState.original = crd.DeepCopy()
	}
	versions := celState.original.DeepCopy().Spec.Versions
	if !rules {
		for i := range versions {
			if s := versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
				dropRules(s.OpenAPIV3Schema)
			}
		}
	}
	crd.Spec.Versions = versions
	if err := cl.Update(ctx, crd); err != nil {
		return fmt.Errorf("update the instances' CRD: %w", err)
	}
	celState.probes++
	probe := instance(client.ObjectKey{Namespace: "si", Name: fmt.Sprintf("cel-probe-%d", celState.probes)})
	if err := cl.Create(ctx, probe); err != nil {
		return fmt.Errorf("create a probe instance: %w", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		changed := probe.DeepCopy()
		changed.Spec.ServiceID = "changed"
		err := cl.Patch(ctx, changed, client.MergeFrom(probe), client.DryRunAll)
		return (err == nil) != rules, nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not serve the CRD with rules=%t within a minute: %w", rules, err)
	}
	return nil
}

// dropRules removes the x-kubernetes-validations of s and its children.
func dropRules(s *apiextensionsv1.JSONSchemaProps) {
	s.XValidations = nil
	for k, p := range s.Properties {
		dropRules(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		dropRules(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		dropRules(s.AdditionalProperties.Schema)
	}
}

// profile writes a CPU profile of the API server over seconds to
// apiserver.prof.
func profile(ctx context.Context, cfg *rest.Config, seconds int) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("profile the API server: %w", err)
	}
	return os.WriteFile("apiserver.prof", raw, 0o600)
}
