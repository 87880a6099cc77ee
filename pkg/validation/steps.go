package validation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/pkg/providerrequests"
	"github.com/marketplane/marketplane/pkg/syncbuf"
)

// placementGrace bounds how long provider-config waits for an object's kind
// to be served by the platform or the onboarding cluster: the provider's
// init, which installs the CRDs, has completed by then.
const placementGrace = 30 * time.Second

// adminToken is the token of the control plane the flow creates.
const adminToken = "admin"

// setup starts or connects to the target and checks that it can deploy the
// provider's image.
func (r *runner) setup(ctx context.Context, s *Step) error {
	s.Title = "target ready"
	switch {
	case r.target == nil:
		return failf(nil, "no target given")
	case r.spec.Provider == nil:
		return failf(nil, "the Spec has no ServiceProvider")
	case !isKind(r.spec.Provider, serviceProviderKind):
		return failf(nil, "Spec.Provider is a %s, want a ServiceProvider (%s)", r.spec.Provider.GroupVersionKind(), serviceProviderKind.GroupVersion())
	case r.image == "":
		return failf(nil, "ServiceProvider %s: spec.image is empty", r.provider)
	}
	s.Title = "target " + r.target.Name() + " ready"
	s.WaitedFor = "the target's clusters"
	if t, ok := r.target.(OwningTarget); ok {
		// Known before anything starts: fail before the API servers.
		binaryOf, hint := t.PlannedBinaries(r.spec)
		if err := checkBinary(binaryOf, r.image); err != nil {
			return failf(nil, "%v; %s", err, hint)
		}
	}
	cl, err := r.target.Start(ctx, r.spec)
	r.cl = cl
	if err != nil {
		return failf(nil, "start %s: %v", r.target.Name(), err)
	}
	if cl.BinaryOf != nil {
		if err := checkBinary(cl.BinaryOf, r.image); err != nil {
			return failf(nil, "%v; %s", err, cl.ImageHint)
		}
	}
	if r.tmp, err = os.MkdirTemp("", "marketplane-validate-"); err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	names := make([]string, 0, 3)
	for _, c := range cl.all() {
		names = append(names, c.Name)
	}
	s.Message = "clusters: " + strings.Join(names, ", ")
	if cl.BinaryOf != nil {
		b, _ := cl.BinaryOf(r.image)
		s.Message += fmt.Sprintf("; image %s runs %s", r.image, b)
	}
	return nil
}

// checkBinary reports an image that binaryOf does not map, or whose binary
// is not an executable file.
func checkBinary(binaryOf func(string) (string, error), image string) error {
	b, err := binaryOf(image)
	if err != nil {
		return err
	}
	fi, err := os.Stat(b)
	switch {
	case err != nil:
		return fmt.Errorf("binary of image %s: %w", image, err)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return fmt.Errorf("binary %s of image %s is not an executable file", b, image)
	}
	return nil
}

// providerObj is the ServiceProvider's name as an object for messages.
func (r *runner) providerObj() string { return "ServiceProvider " + r.provider }

// getProvider reads the ServiceProvider into r.sp.
func (r *runner) getProvider(ctx context.Context) error {
	sp := &unstructured.Unstructured{}
	sp.SetGroupVersionKind(serviceProviderKind)
	if err := r.cl.Platform.Client.Get(ctx, client.ObjectKey{Name: r.provider}, sp); err != nil {
		return err
	}
	r.sp = sp
	return nil
}

// providerDir is the process deployer's directory of the provider.
func (r *runner) providerDir() string {
	return filepath.Join(r.cl.LogDir, "serviceprovider-"+r.provider)
}

// logs returns the tails of the provider's logs (init only, or init and
// run), or a hint where they are.
func (r *runner) logs(run bool) []LogTail {
	if r.cl == nil {
		return nil
	}
	if r.cl.LogDir == "" {
		hint := r.cl.LogHint
		if hint == "" {
			hint = logHintFor(r.provider)
		}
		return []LogTail{{Name: "provider logs", Lines: []string{hint}}}
	}
	return providerLogs(r.providerDir(), r.o.logLines, run)
}

// deniedRequests names the provider's Denied AccessRequests and
// ClusterRequests with the reason and rule of each denial, or "" when
// there are none or they cannot be read.
func (r *runner) deniedRequests(ctx context.Context) string {
	if r.cl == nil || r.provider == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookTimeout)
	defer cancel()
	denied, err := providerrequests.DeniedRequests(ctx, r.cl.Platform.Client, "ServiceProvider", r.provider)
	if err != nil {
		return ""
	}
	return strings.Join(denied, "; ")
}

// providerFailure is the evidence about the ServiceProvider: its last
// conditions and events and the tails of its logs.
func (r *runner) providerFailure(ctx context.Context, run bool) *Failure {
	f := &Failure{Object: r.providerObj(), Logs: r.logs(run)}
	_ = r.getProvider(ctx) // on error, the conditions last read
	f.Conditions = conditionsOf(r.sp)
	f.Events = eventsOf(ctx, r.cl.Platform.Client, serviceProviderKind.Kind, "", r.provider)
	return f
}

// objectFailure is the evidence about obj on c: its last conditions and
// events, and with logs the tails of the provider's run logs.
func (r *runner) objectFailure(ctx context.Context, c *Cluster, obj *unstructured.Unstructured, logs bool) *Failure {
	f := &Failure{Object: describeObject(obj, c.Name)}
	cur := obj.DeepCopy()
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err == nil {
		f.Conditions = conditionsOf(cur)
	}
	f.Events = eventsOf(ctx, c.Client, obj.GetKind(), obj.GetNamespace(), obj.GetName())
	if logs {
		f.Logs = r.logs(true)
	}
	return f
}

// describeObject names obj and its cluster: "Sample tenant-a/demo on the
// onboarding cluster".
func describeObject(obj client.Object, clusterName string) string {
	return objectName(obj, obj.GetObjectKind().GroupVersionKind().Kind) + " on the " + clusterName + " cluster"
}

// apply applies a copy of obj to c with server-side apply, creating its
// namespace first when it is missing (and recording that the flow created
// it), and returns the copy: a namespaced object without a namespace gets
// "default", as kubectl gives it.
func (r *runner) apply(ctx context.Context, c *Cluster, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj = obj.DeepCopy()
	namespaced, err := c.Client.IsObjectNamespaced(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: kind %s: %w", objectName(obj, obj.GetKind()), obj.GroupVersionKind(), err)
	}
	if namespaced {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
		if err := r.ensureNamespace(ctx, c, obj.GetNamespace()); err != nil {
			return nil, err
		}
	}
	unstructured.RemoveNestedField(obj.Object, "status")
	obj.SetResourceVersion("")
	if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("apply %s: %w", describeObject(obj, c.Name), err)
	}
	return obj, nil
}

// ensureNamespace creates the namespace name on c when it does not exist.
func (r *runner) ensureNamespace(ctx context.Context, c *Cluster, name string) error {
	err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	err = c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("create namespace %s on the %s cluster: %w", name, c.Name, err)
	}
	r.createdNamespaces[c.Name] = append(r.createdNamespaces[c.Name], name)
	return nil
}

// providerInit applies the ServiceProvider and waits until its init
// completed.
func (r *runner) providerInit(ctx context.Context, s *Step) error {
	s.Title = r.providerObj() + " initialized"
	s.WaitedFor = r.providerObj() + " Initialized=True"
	s.Timeout = r.timeout
	if _, err := r.apply(ctx, r.cl.Platform, r.spec.Provider); err != nil {
		return failf(nil, "%v", err)
	}
	r.spApplied = true
	err := waitUntil(ctx, r.timeout, func(ctx context.Context) (bool, string, error) {
		if err := r.getProvider(ctx); err != nil {
			return false, "get: " + err.Error(), nil
		}
		conds := conditionsOf(r.sp)
		c := findCondition(conds, string(providerv1alpha1.ConditionInitialized))
		switch {
		case c == nil:
		case c.Status == metav1.ConditionTrue && generationCurrent(r.sp, c):
			return true, "", nil
		case c.Reason == string(providerv1alpha1.ReasonInitFailed):
			return false, "", fmt.Errorf("its init failed (Initialized=False %s): %s", c.Reason, c.Message)
		}
		return false, describeConditions(conds), nil
	})
	if err != nil {
		return failf(r.providerFailure(ctx, false), "%s: %v", r.providerObj(), err)
	}
	// openMCP's template logs a denied onboarding request and exits 0: an
	// init that completed with a request refused did not do its work.
	if denied := r.deniedRequests(ctx); denied != "" {
		return failf(r.providerFailure(ctx, false), "%s: init exited 0, but the operator denied its request: %s", r.providerObj(), denied)
	}
	r.resources = registeredKinds(r.sp)
	if len(r.resources) == 0 {
		s.Message = "registered no service kinds (status.resources is empty)"
		return nil
	}
	names := make([]string, 0, len(r.resources))
	for _, gvk := range r.resources {
		names = append(names, gvk.Kind+"."+gvk.Group)
	}
	s.Message = "registered " + strings.Join(names, ", ")
	return nil
}

// generationCurrent reports whether the condition c (or obj's
// status.observedGeneration) is for obj's current generation; an object
// that does not record it counts as current.
func generationCurrent(obj *unstructured.Unstructured, c *metav1.Condition) bool {
	gen := obj.GetGeneration()
	if c != nil && c.ObservedGeneration != 0 && c.ObservedGeneration < gen {
		return false
	}
	og, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	return !found || og == 0 || og >= gen
}

// registeredKinds reads status.resources of the ServiceProvider.
func registeredKinds(sp *unstructured.Unstructured) []schema.GroupVersionKind {
	raw, _, _ := unstructured.NestedSlice(sp.Object, "status", "resources")
	var out []schema.GroupVersionKind
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out = append(out, schema.GroupVersionKind{Group: str("group"), Version: str("version"), Kind: str("kind")})
	}
	return out
}

// registered reports whether obj's kind is one the provider registered.
func (r *runner) registered(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return slices.ContainsFunc(r.resources, func(g schema.GroupVersionKind) bool { return g.Group == gvk.Group && g.Kind == gvk.Kind })
}

// providerConfig places every object of the Spec and applies those for the
// platform cluster (the ProviderConfig).
func (r *runner) providerConfig(ctx context.Context, s *Step) error {
	s.Title = "provider's objects placed, platform objects applied"
	s.WaitedFor = "the kinds of the Spec's objects served by the platform or the onboarding cluster"
	s.Timeout = min(r.timeout, placementGrace)
	var platform, onboarding []string
	for _, obj := range r.spec.Objects {
		where, err := r.place(ctx, obj, s.Timeout)
		if err != nil {
			return err
		}
		name := objectName(obj, obj.GetKind())
		if where == ClusterOnboarding {
			r.services = append(r.services, obj)
			onboarding = append(onboarding, name)
			continue
		}
		applied, err := r.apply(ctx, r.cl.Platform, obj)
		if err != nil {
			return failf(&Failure{Object: describeObject(obj, ClusterPlatform)}, "%v", err)
		}
		r.platformObjs = append(r.platformObjs, applied)
		platform = append(platform, name)
	}
	if len(platform) == 0 {
		platform = []string{"none"}
	}
	if len(onboarding) == 0 {
		onboarding = []string{"none"}
	}
	s.Message = "applied to the platform cluster: " + strings.Join(platform, ", ") + "; service objects: " + strings.Join(onboarding, ", ")
	return nil
}

// place decides the cluster of obj: its AnnotationCluster, else the
// platform cluster when that serves its kind, else the onboarding cluster
// when that does. A kind served by neither within timeout is a failure.
func (r *runner) place(ctx context.Context, obj *unstructured.Unstructured, timeout time.Duration) (string, error) {
	if v := obj.GetAnnotations()[AnnotationCluster]; v != "" {
		if v != ClusterPlatform && v != ClusterOnboarding {
			return "", failf(nil, "%s: annotation %s is %q, want %q or %q", objectName(obj, obj.GetKind()), AnnotationCluster, v, ClusterPlatform, ClusterOnboarding)
		}
		return v, nil
	}
	var where string
	err := waitUntil(ctx, timeout, func(context.Context) (bool, string, error) {
		for _, c := range []*Cluster{r.cl.Platform, r.cl.Onboarding} {
			_, err := c.Client.IsObjectNamespaced(obj)
			switch {
			case err == nil:
				where = c.Name
				return true, "", nil
			case !apimeta.IsNoMatchError(err):
				return false, "", fmt.Errorf("kind %s on the %s cluster: %w", obj.GroupVersionKind(), c.Name, err)
			}
		}
		return false, "served by neither cluster", nil
	})
	if err != nil {
		gvk := obj.GroupVersionKind()
		return "", failf(&Failure{Object: objectName(obj, obj.GetKind())},
			"kind %s of %s (apiVersion %s) is served by neither the platform nor the onboarding cluster (%v): the provider's init installs its CRDs; for other kinds apply their CRD first or set annotation %s",
			gvk.Kind, objectName(obj, obj.GetKind()), gvk.GroupVersion(), err, AnnotationCluster)
	}
	return where, nil
}

// providerReady waits until the ServiceProvider is Ready and the operator
// accepted its registered kinds.
func (r *runner) providerReady(ctx context.Context, s *Step) error {
	s.Title = r.providerObj() + " Ready"
	s.WaitedFor = r.providerObj() + " Ready=True"
	s.Timeout = r.timeout
	err := waitUntil(ctx, r.timeout, func(ctx context.Context) (bool, string, error) {
		if err := r.getProvider(ctx); err != nil {
			return false, "get: " + err.Error(), nil
		}
		conds := conditionsOf(r.sp)
		if c := findCondition(conds, string(providerv1alpha1.ConditionInitialized)); c != nil && c.Reason == string(providerv1alpha1.ReasonInitFailed) {
			return false, "", fmt.Errorf("its init failed (Initialized=False %s): %s", c.Reason, c.Message)
		}
		c := findCondition(conds, string(providerv1alpha1.ConditionReady))
		switch {
		case c == nil:
		case c.Status == metav1.ConditionTrue && generationCurrent(r.sp, c):
			return true, "", nil
		case c.Reason == string(providerv1alpha1.ReasonProviderCrashing):
			return false, "", fmt.Errorf("a run process exits (Ready=False %s): %s", c.Reason, c.Message)
		}
		return false, describeConditions(conds), nil
	})
	if err != nil {
		return failf(r.providerFailure(ctx, true), "%s: %v", r.providerObj(), err)
	}
	if c := findCondition(conditionsOf(r.sp), string(providerv1alpha1.ConditionResourcesAccepted)); c != nil && c.Status == metav1.ConditionFalse {
		return failf(r.providerFailure(ctx, true), "%s: the operator does not accept its registered kinds (ResourcesAccepted=False %s): %s", r.providerObj(), c.Reason, c.Message)
	}
	phase, _, _ := unstructuredString(r.sp, "status", "phase")
	s.Message = "phase " + phase
	return nil
}

// controlPlane creates the control plane the service objects are for and
// reads the tenant's kubeconfig from it.
func (r *runner) controlPlane(ctx context.Context, s *Step) error {
	s.Title = "control plane Ready"
	var forCP *unstructured.Unstructured
	for _, obj := range r.services {
		if r.registered(obj) {
			forCP = obj
			break
		}
	}
	if r.spec.ControlPlane == nil && forCP == nil {
		kinds := "none"
		if len(r.resources) > 0 {
			names := make([]string, 0, len(r.resources))
			for _, g := range r.resources {
				names = append(names, g.Kind)
			}
			kinds = strings.Join(names, ", ")
		}
		return skip(s, "no control plane needed: no service object is of a kind in the ServiceProvider's status.resources (%s)", kinds)
	}
	obj := &unstructured.Unstructured{}
	if r.spec.ControlPlane != nil {
		obj = r.spec.ControlPlane.DeepCopy()
	} else {
		obj.SetGroupVersionKind(managedControlPlaneKind)
		obj.SetName(forCP.GetName())
		obj.SetNamespace(forCP.GetNamespace())
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
	}
	token := ensureAdminToken(obj)
	r.cpObj, r.cpKind = obj, obj.GetKind()
	name := objectName(obj, r.cpKind)
	s.Title = name + " Ready"
	s.WaitedFor = fmt.Sprintf("%s Ready=True with status.access[%s]", name, token)
	s.Timeout = r.timeout
	obj, err := r.apply(ctx, r.cl.Onboarding, obj)
	if err != nil {
		return failf(nil, "%v", err)
	}
	r.cpObj, r.cpApplied = obj, true
	cur := obj.DeepCopy()
	var secretName string
	err = waitUntil(ctx, r.timeout, func(ctx context.Context) (bool, string, error) {
		if err := r.cl.Onboarding.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			return false, "get: " + err.Error(), nil
		}
		conds := conditionsOf(cur)
		c := findCondition(conds, common.ConditionTypeReady)
		if c == nil || c.Status != metav1.ConditionTrue {
			return false, describeConditions(conds), nil
		}
		secretName, _, _ = unstructured.NestedString(cur.Object, "status", "access", token, "name")
		if secretName == "" {
			return false, fmt.Sprintf("Ready, but status.access has no %q", token), nil
		}
		return true, "", nil
	})
	if err != nil {
		return failf(r.objectFailure(ctx, r.cl.Onboarding, obj, false), "%s: %v", name, err)
	}
	secret := &corev1.Secret{}
	if err := r.cl.Onboarding.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: secretName}, secret); err != nil {
		return failf(nil, "kubeconfig Secret %s/%s of %s: %v", obj.GetNamespace(), secretName, name, err)
	}
	kubeconfig := secret.Data[clustersv1alpha1.SecretKeyKubeconfig]
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return failf(nil, "kubeconfig Secret %s/%s of %s cannot be read: %v", obj.GetNamespace(), secretName, name, err)
	}
	c, err := newClient(cfg)
	if err != nil {
		return failf(nil, "client of the MCP cluster of %s: %v", name, err)
	}
	path := filepath.Join(r.tmp, "mcp.Kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write the tenant's kubeconfig: %w", err)
	}
	r.cp = &ControlPlaneAccess{Kind: r.cpKind, Name: obj.GetName(), Namespace: obj.GetNamespace(), Kubeconfig: kubeconfig, Config: cfg, Client: c}
	s.Message = fmt.Sprintf("tenant kubeconfig from Secret %s/%s", obj.GetNamespace(), secretName)
	return nil
}

// ensureAdminToken returns the token of obj's spec.iam.tokens whose
// kubeconfig the flow uses: "admin" when there is one, else the first;
// without tokens it adds "admin" bound to cluster-admin.
func ensureAdminToken(obj *unstructured.Unstructured) string {
	tokens, _, _ := unstructured.NestedSlice(obj.Object, "spec", "iam", "tokens")
	first := ""
	for _, t := range tokens {
		m, _ := t.(map[string]any)
		name, _ := m["name"].(string)
		if name == adminToken {
			return name
		}
		if first == "" {
			first = name
		}
	}
	if first != "" {
		return first
	}
	tokens = append(tokens, map[string]any{
		"name":     adminToken,
		"roleRefs": []any{map[string]any{"kind": string(common.RoleKindClusterRole), "name": "cluster-admin"}},
	})
	_ = unstructured.SetNestedSlice(obj.Object, tokens, "spec", "iam", "tokens")
	return adminToken
}

// serviceReady snapshots the CRDs and namespaces of the MCP and workload
// clusters, applies the service objects and waits until each is Ready.
func (r *runner) serviceReady(ctx context.Context, s *Step) error {
	s.Title = "service objects Ready"
	if len(r.services) == 0 {
		return skip(s, "no service objects (objects for the onboarding cluster) in the Spec")
	}
	names := make([]string, 0, len(r.services))
	for _, obj := range r.services {
		names = append(names, objectName(obj, obj.GetKind()))
	}
	s.Title = strings.Join(names, ", ") + " Ready"
	s.WaitedFor = strings.Join(names, ", ") + " Ready=True for the current generation"
	s.Timeout = r.timeout
	r.domainClients = map[string]client.Client{}
	if r.cp != nil {
		r.domainClients[ClusterMCP] = r.cp.Client
	}
	if r.cl.Workload != nil {
		r.domainClients[ClusterWorkload] = r.cl.Workload.Client
	}
	r.before = map[string]*snapshot{}
	for name, c := range r.domainClients {
		snap, err := takeSnapshot(ctx, c)
		if err != nil {
			return failf(nil, "snapshot of the %s cluster: %v", clusterLabel(name), err)
		}
		r.before[name] = snap
	}
	for _, obj := range r.services {
		applied, err := r.apply(ctx, r.cl.Onboarding, obj)
		if err != nil {
			return failf(&Failure{Object: describeObject(obj, ClusterOnboarding)}, "%v", err)
		}
		r.servicesApplied = append(r.servicesApplied, applied)
	}
	for _, obj := range r.servicesApplied {
		name := objectName(obj, obj.GetKind())
		cur := obj.DeepCopy()
		err := waitUntil(ctx, r.timeout, func(ctx context.Context) (bool, string, error) {
			if err := r.cl.Onboarding.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
				return false, "get: " + err.Error(), nil
			}
			conds := conditionsOf(cur)
			phase, _, _ := unstructuredString(cur, "status", "phase")
			ready := findCondition(conds, "Ready")
			if ready != nil && ready.Status == metav1.ConditionTrue && generationCurrent(cur, ready) {
				return true, "", nil
			}
			if why := serviceFailed(cur, phase, conds); why != "" {
				return false, "", errors.New(why)
			}
			seen := describeConditions(conds)
			if phase != "" {
				seen = "phase " + phase + "; " + seen
			}
			return false, seen, nil
		})
		if err != nil {
			return failf(r.objectFailure(ctx, r.cl.Onboarding, obj, true), "%s: %v", name, err)
		}
	}
	return nil
}

// serviceFailed says why a service object cannot become Ready without a
// change, or "" when it still may: phase Failed for its current generation,
// or a condition with reason InvalidUserInput.
func serviceFailed(obj *unstructured.Unstructured, phase string, conds []metav1.Condition) string {
	ready := findCondition(conds, "Ready")
	if phase == string(common.PhaseFailed) && generationCurrent(obj, ready) {
		if ready != nil {
			return fmt.Sprintf("it failed: phase Failed, Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
		}
		return "it failed: phase Failed"
	}
	for _, c := range conds {
		if c.Status == metav1.ConditionFalse && c.Reason == "InvalidUserInput" && generationCurrent(obj, &c) {
			return fmt.Sprintf("invalid input: %s=False %s: %s", c.Type, c.Reason, c.Message)
		}
	}
	return ""
}

// snapshot is what a cluster has of CRDs and namespaces; infra are the
// namespaces the operator's access controller creates (and keeps).
type snapshot struct {
	crds, namespaces, infra map[string]bool
}

// takeSnapshot lists the CRDs and namespaces of c.
func takeSnapshot(ctx context.Context, c client.Client) (*snapshot, error) {
	s := &snapshot{crds: map[string]bool{}, namespaces: map[string]bool{}, infra: map[string]bool{}}
	crds := &metav1.PartialObjectMetadataList{}
	crds.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
	if err := c.List(ctx, crds); err != nil {
		return nil, fmt.Errorf("list CRDs: %w", err)
	}
	for _, crd := range crds.Items {
		s.crds[crd.Name] = true
	}
	nss := &corev1.NamespaceList{}
	if err := c.List(ctx, nss); err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		s.namespaces[ns.Name] = true
		if ns.Labels[providerv1alpha1.ManagedByLabel] == providerv1alpha1.ManagedByOperator {
			s.infra[ns.Name] = true
		}
	}
	return s, nil
}

// clusterLabel names a domain cluster in messages.
func clusterLabel(name string) string {
	if name == ClusterMCP {
		return "MCP"
	}
	return name
}

// domainService records what the service objects brought into the MCP and
// workload clusters: the new CRDs and namespaces.
func (r *runner) domainService(ctx context.Context, s *Step) error {
	s.Title = "DomainService and its API present"
	if r.before == nil {
		return skip(s, "no service objects")
	}
	s.WaitedFor = "new CRDs and namespaces in the MCP and workload clusters"
	r.added = map[string]*snapshot{}
	var parts []string
	for _, name := range []string{ClusterMCP, ClusterWorkload} {
		c, ok := r.domainClients[name]
		if !ok {
			continue
		}
		now, err := takeSnapshot(ctx, c)
		if err != nil {
			return failf(nil, "snapshot of the %s cluster: %v", clusterLabel(name), err)
		}
		added := &snapshot{crds: map[string]bool{}, namespaces: map[string]bool{}}
		for crd := range now.crds {
			if !r.before[name].crds[crd] {
				added.crds[crd] = true
			}
		}
		for ns := range now.namespaces {
			if !r.before[name].namespaces[ns] && !now.infra[ns] {
				added.namespaces[ns] = true
			}
		}
		r.added[name] = added
		if err := r.waitServed(ctx, name, c, sortedKeys(added.crds)); err != nil {
			return err
		}
		var items []string
		for _, crd := range sortedKeys(added.crds) {
			items = append(items, "CRD "+crd)
		}
		for _, ns := range sortedKeys(added.namespaces) {
			items = append(items, "namespace "+ns)
		}
		if len(items) > 0 {
			parts = append(parts, fmt.Sprintf("%s cluster: %s", clusterLabel(name), strings.Join(items, ", ")))
		}
	}
	if len(parts) == 0 {
		s.Message = "no new CRDs or namespaces in the MCP or workload cluster"
		return nil
	}
	s.Message = "new on the " + strings.Join(parts, "; ")
	return nil
}

// waitServed waits until each CRD of crds on the cluster name (reached by
// c) is Established and its kind is found through discovery for every
// served version: a CRD exists a moment before its API is served, and a
// check or a deletion in that moment sees "no matches for kind".
func (r *runner) waitServed(ctx context.Context, name string, c client.Client, crds []string) error {
	if len(crds) == 0 {
		return nil
	}
	err := waitUntil(ctx, r.timeout, func(ctx context.Context) (bool, string, error) {
		for _, crdName := range crds {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
				return false, fmt.Sprintf("get CRD %s: %v", crdName, err), nil
			}
			if c := findCondition(conditionsOf(crd), "Established"); c == nil || c.Status != metav1.ConditionTrue {
				return false, fmt.Sprintf("CRD %s is not Established", crdName), nil
			}
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
			versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
			for _, v := range versions {
				m, _ := v.(map[string]any)
				version, _ := m["name"].(string)
				if served, _ := m["served"].(bool); !served {
					continue
				}
				if _, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind}, version); err != nil {
					return false, fmt.Sprintf("CRD %s: %s.%s/%s is not served yet: %v", crdName, kind, group, version, err), nil
				}
			}
		}
		return true, "", nil
	})
	if err != nil {
		return failf(nil, "the new CRDs on the %s cluster are not served: %v", clusterLabel(name), err)
	}
	return nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// check runs the caller's check of the DomainServiceAPI.
func (r *runner) check(ctx context.Context, s *Step) error {
	s.Title = "check of the DomainServiceAPI"
	if r.o.check == nil {
		return skip(s, "no check given")
	}
	s.WaitedFor = "the check"
	s.Timeout = r.timeout
	env := CheckEnv{
		ControlPlane: r.cp,
		Platform:     r.cl.Platform.Client,
		Onboarding:   r.cl.Onboarding.Client,
		Kubeconfigs: map[string]string{
			ClusterPlatform:   r.cl.Platform.Kubeconfig,
			ClusterOnboarding: r.cl.Onboarding.Kubeconfig,
		},
	}
	if r.cl.Workload != nil {
		env.Workload = r.cl.Workload.Client
		env.Kubeconfigs[ClusterWorkload] = r.cl.Workload.Kubeconfig
	}
	if r.cp != nil {
		env.Kubeconfigs[ClusterMCP] = filepath.Join(r.tmp, "mcp.Kubeconfig")
	}
	for _, obj := range r.servicesApplied {
		cur := obj.DeepCopy()
		if err := r.cl.Onboarding.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			return failf(nil, "read %s: %v", describeObject(obj, ClusterOnboarding), err)
		}
		env.Services = append(env.Services, cur)
	}
	var out syncbuf.Buffer
	env.Out = &out
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	err := r.o.check(cctx, env)
	tail := tailLines(out.String(), r.o.logLines)
	if err != nil {
		f := &Failure{}
		if len(tail) > 0 {
			f.Logs = []LogTail{{Name: "check output", Lines: tail}}
		}
		return failf(f, "check failed: %v", err)
	}
	s.Message = "check passed"
	if len(tail) > 0 {
		s.Message += "; output: " + strings.Join(tail, "\n")
	}
	return nil
}

// serviceDelete deletes the service objects the flow applied and waits
// until they are gone.
func (r *runner) serviceDelete(ctx context.Context, s *Step) error {
	s.Title = "service objects deleted"
	if len(r.servicesApplied) == 0 {
		return skip(s, "no service objects were created")
	}
	s.WaitedFor = "the service objects gone"
	s.Timeout = r.timeout
	for _, obj := range r.servicesApplied {
		if err := r.cl.Onboarding.Client.Delete(ctx, obj.DeepCopy()); client.IgnoreNotFound(err) != nil {
			return failf(nil, "delete %s: %v", describeObject(obj, ClusterOnboarding), err)
		}
	}
	for _, obj := range r.servicesApplied {
		err := waitGone(ctx, r.timeout, r.cl.Onboarding.Client, obj)
		if err != nil {
			return failf(r.objectFailure(ctx, r.cl.Onboarding, obj, true), "%s is not deleted: %v", objectName(obj, obj.GetKind()), err)
		}
	}
	return nil
}

// waitGone waits until obj no longer exists on c.
func waitGone(ctx context.Context, timeout time.Duration, c client.Client, obj *unstructured.Unstructured) error {
	cur := obj.DeepCopy()
	return waitUntil(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur)
		switch {
		case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err):
			return true, "", nil
		case err != nil:
			return false, "get: " + err.Error(), nil
		}
		return false, "it still exists: " + describeConditions(conditionsOf(cur)), nil
	})
}

// domainServiceGone waits until the CRDs and namespaces the services
// brought are gone again, and the provider's requests for the tenant.
func (r *runner) domainServiceGone(ctx context.Context, s *Step) error {
	s.Title = "DomainService and its API gone"
	if r.added == nil {
		return skip(s, "no service objects")
	}
	s.WaitedFor = "the new CRDs and namespaces gone; no AccessRequest or ClusterRequest of the provider for the tenant"
	s.Timeout = r.timeout
	var first string
	err := waitUntil(ctx, r.timeout, func(ctx context.Context) (bool, string, error) {
		left, err := r.domainLeftovers(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		if len(left) == 0 {
			return true, "", nil
		}
		first = left[0]
		return false, strings.Join(left, "; "), nil
	})
	if err != nil {
		return failf(&Failure{Object: first, Logs: r.logs(true)}, "left behind: %v", err)
	}
	return nil
}

// domainLeftovers lists what of the DomainService remains: the CRDs and
// namespaces the services brought, and the provider's AccessRequests and
// ClusterRequests for the tenants of the service objects.
func (r *runner) domainLeftovers(ctx context.Context) ([]string, error) {
	var left []string
	for _, name := range []string{ClusterMCP, ClusterWorkload} {
		added, ok := r.added[name]
		if !ok {
			continue
		}
		l, err := clusterLeftovers(ctx, r.domainClients[name], name, added)
		if err != nil {
			return nil, err
		}
		left = append(left, l...)
	}
	l, err := r.requestLeftovers(ctx)
	if err != nil {
		return nil, err
	}
	return append(left, l...), nil
}

// clusterLeftovers lists the CRDs and namespaces of added that remain on
// the cluster name that c reads.
func clusterLeftovers(ctx context.Context, c client.Client, name string, added *snapshot) ([]string, error) {
	var left []string
	for _, crd := range sortedKeys(added.crds) {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		err := c.Get(ctx, client.ObjectKey{Name: crd}, obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get CRD %s on the %s cluster: %w", crd, clusterLabel(name), err)
		default:
			left = append(left, fmt.Sprintf("CRD %s remains on the %s cluster", crd, clusterLabel(name)))
		}
	}
	for _, ns := range sortedKeys(added.namespaces) {
		// A namespace being deleted counts as gone: the cluster's
		// namespace controller finishes that without the provider (and a
		// cluster without one, like the in-process workload cluster,
		// never does).
		obj := &corev1.Namespace{}
		err := c.Get(ctx, client.ObjectKey{Name: ns}, obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get namespace %s on the %s cluster: %w", ns, clusterLabel(name), err)
		case obj.DeletionTimestamp.IsZero():
			left = append(left, fmt.Sprintf("namespace %s remains on the %s cluster", ns, clusterLabel(name)))
		}
	}
	return left, nil
}

// requestLeftovers lists the provider's AccessRequests and ClusterRequests
// that remain for the tenants of the service objects.
func (r *runner) requestLeftovers(ctx context.Context) ([]string, error) {
	tenants := map[string]bool{}
	platformNamespaces := map[string]bool{}
	for _, obj := range r.servicesApplied {
		tenants[obj.GetNamespace()+"/"+obj.GetName()] = true
		platformNamespaces[corev2alpha1.StableMCPNamespace(obj.GetNamespace(), obj.GetName())] = true
	}
	var left []string
	for _, l := range []struct {
		kind string
		list client.ObjectList
	}{{"AccessRequest", &clustersv1alpha1.AccessRequestList{}}, {"ClusterRequest", &clustersv1alpha1.ClusterRequestList{}}} {
		if err := r.cl.Platform.Client.List(ctx, l.list, client.MatchingLabels{providerv1alpha1.ManagedByLabel: r.provider}); err != nil {
			return nil, fmt.Errorf("list %ss on the platform cluster: %w", l.kind, err)
		}
		items, err := apimeta.ExtractList(l.list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			o, ok := item.(client.Object)
			if !ok {
				continue
			}
			labels := o.GetLabels()
			tenant := labels[providerv1alpha1.OnboardingNamespaceLabel] + "/" + labels[providerv1alpha1.OnboardingNameLabel]
			if tenants[tenant] || platformNamespaces[o.GetNamespace()] {
				left = append(left, fmt.Sprintf("%s %s/%s of the provider remains on the platform cluster", l.kind, o.GetNamespace(), o.GetName()))
			}
		}
	}
	return left, nil
}

// controlPlaneDelete deletes the control plane the flow created and waits
// until it is gone; the namespaces the flow created on the onboarding
// cluster go too.
func (r *runner) controlPlaneDelete(ctx context.Context, s *Step) error {
	s.Title = "control plane deleted"
	if !r.cpApplied {
		return skip(s, "no control plane was created")
	}
	name := objectName(r.cpObj, r.cpKind)
	s.Title = name + " deleted"
	s.WaitedFor = name + " gone"
	s.Timeout = r.timeout
	if err := r.cl.Onboarding.Client.Delete(ctx, r.cpObj.DeepCopy()); client.IgnoreNotFound(err) != nil {
		return failf(nil, "delete %s: %v", name, err)
	}
	if err := waitGone(ctx, r.timeout, r.cl.Onboarding.Client, r.cpObj); err != nil {
		return failf(r.objectFailure(ctx, r.cl.Onboarding, r.cpObj, false), "%s is not deleted: %v", name, err)
	}
	s.Message = r.deleteCreatedNamespaces(ctx, r.cl.Onboarding)
	return nil
}

// deleteCreatedNamespaces deletes the namespaces the flow created on c
// (without waiting) and says which.
func (r *runner) deleteCreatedNamespaces(ctx context.Context, c *Cluster) string {
	names := r.createdNamespaces[c.Name]
	if len(names) == 0 {
		return ""
	}
	var errs []string
	for _, ns := range names {
		if err := c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err.Error())
		}
	}
	delete(r.createdNamespaces, c.Name)
	msg := fmt.Sprintf("deleted the namespaces the flow created on the %s cluster: %s", c.Name, strings.Join(names, ", "))
	if len(errs) > 0 {
		msg += " (errors: " + strings.Join(errs, "; ") + ")"
	}
	return msg
}

// providerDelete deletes the platform objects and the ServiceProvider and
// checks that nothing of the provider remains: its namespace and RBAC, the
// objects of its registered kinds and, for local targets, its processes.
// The CRDs its init installed are kept by design.
func (r *runner) providerDelete(ctx context.Context, s *Step) error {
	s.Title = r.providerObj() + " deleted"
	if !r.spApplied {
		return skip(s, "no ServiceProvider was created")
	}
	s.WaitedFor = r.providerObj() + " gone, with its namespace, RBAC, service objects and processes"
	s.Timeout = r.timeout
	// The platform objects (the ProviderConfig) go first, while the
	// provider still runs to release them.
	for i := len(r.platformObjs) - 1; i >= 0; i-- {
		obj := r.platformObjs[i]
		if err := r.cl.Platform.Client.Delete(ctx, obj.DeepCopy()); client.IgnoreNotFound(err) != nil && !apimeta.IsNoMatchError(err) {
			return failf(nil, "delete %s: %v", describeObject(obj, ClusterPlatform), err)
		}
	}
	for _, obj := range r.platformObjs {
		if err := waitGone(ctx, r.timeout, r.cl.Platform.Client, obj); err != nil {
			return failf(r.objectFailure(ctx, r.cl.Platform, obj, true), "%s is not deleted: %v", describeObject(obj, ClusterPlatform), err)
		}
	}
	if err := r.getProvider(ctx); err != nil && !apierrors.IsNotFound(err) {
		return failf(nil, "get %s: %v", r.providerObj(), err)
	}
	if r.sp != nil {
		r.resources = registeredKinds(r.sp)
	}
	sp := &unstructured.Unstructured{}
	sp.SetGroupVersionKind(serviceProviderKind)
	sp.SetName(r.provider)
	if err := r.cl.Platform.Client.Delete(ctx, sp); client.IgnoreNotFound(err) != nil {
		return failf(nil, "delete %s: %v", r.providerObj(), err)
	}
	if err := waitGone(ctx, r.timeout, r.cl.Platform.Client, sp); err != nil {
		return failf(r.providerFailure(ctx, true), "%s is not deleted: %v", r.providerObj(), err)
	}
	var first string
	err := waitUntil(ctx, r.timeout, func(ctx context.Context) (bool, string, error) {
		left, err := r.providerLeftovers(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		if len(left) == 0 {
			return true, "", nil
		}
		first = left[0]
		return false, strings.Join(left, "; "), nil
	})
	if err != nil {
		return failf(&Failure{Object: first, Logs: r.logs(true)}, "left behind by %s: %v", r.providerObj(), err)
	}
	var notes []string
	if kept := r.keptCRDs(ctx); len(kept) > 0 {
		notes = append(notes, "kept by design: "+strings.Join(kept, ", "))
	}
	created := r.createdNamespaces[r.cl.Platform.Name]
	if msg := r.deleteCreatedNamespaces(ctx, r.cl.Platform); msg != "" {
		notes = append(notes, msg)
	}
	s.Message = strings.Join(notes, "; ")
	// What the provider made in them, or left a finalizer on, holds them.
	return r.waitNamespacesGone(ctx, r.cl.Platform, created)
}

// waitNamespacesGone waits until the namespaces names on c are gone; a
// namespace that stays names what its deletion waits for (the namespace
// controller's conditions).
func (r *runner) waitNamespacesGone(ctx context.Context, c *Cluster, names []string) error {
	var stuck *corev1.Namespace
	err := waitUntil(ctx, r.timeout, func(ctx context.Context) (bool, string, error) {
		for _, name := range names {
			ns := &corev1.Namespace{}
			err := c.Client.Get(ctx, client.ObjectKey{Name: name}, ns)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return false, "get namespace " + name + ": " + err.Error(), nil
			}
			stuck = ns
			// The namespace controller's True conditions say what is left.
			var left []metav1.Condition
			for _, c := range namespaceConditions(ns) {
				if c.Status == metav1.ConditionTrue {
					left = append(left, c)
				}
			}
			return false, fmt.Sprintf("namespace %s is still being deleted: %s", name, describeConditions(left)), nil
		}
		return true, "", nil
	})
	if err == nil {
		return nil
	}
	f := &Failure{Logs: r.logs(true)}
	if stuck != nil {
		f.Object = "namespace " + stuck.Name + " on the " + c.Name + " cluster"
		f.Conditions = namespaceConditions(stuck)
		f.Events = eventsOf(ctx, c.Client, "Namespace", "", stuck.Name)
	}
	return failf(f, "the namespaces the flow created on the %s cluster are not deleted (something of the provider is left in them): %v", c.Name, err)
}

// namespaceConditions returns the conditions of ns in the form of the
// other objects' conditions.
func namespaceConditions(ns *corev1.Namespace) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(ns.Status.Conditions))
	for _, c := range ns.Status.Conditions {
		out = append(out, metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return out
}

// providerLeftovers lists what of the deleted provider remains.
func (r *runner) providerLeftovers(ctx context.Context) ([]string, error) {
	var left []string
	selector := client.MatchingLabels{providerv1alpha1.ProviderNameLabel: r.provider}
	for _, l := range []struct {
		kind string
		list client.ObjectList
	}{{"namespace", &corev1.NamespaceList{}}, {"ClusterRole", &metav1.PartialObjectMetadataList{}}, {"ClusterRoleBinding", &metav1.PartialObjectMetadataList{}}} {
		if p, ok := l.list.(*metav1.PartialObjectMetadataList); ok {
			p.SetGroupVersionKind(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: l.kind + "List"})
		}
		if err := r.cl.Platform.Client.List(ctx, l.list, selector); err != nil {
			return nil, fmt.Errorf("list %ss on the platform cluster: %w", l.kind, err)
		}
		items, err := apimeta.ExtractList(l.list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			if o, ok := item.(client.Object); ok {
				left = append(left, fmt.Sprintf("%s %s of the provider remains on the platform cluster", l.kind, o.GetName()))
			}
		}
	}
	for _, gvk := range r.resources {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := r.cl.Onboarding.Client.List(ctx, list)
		switch {
		case apimeta.IsNoMatchError(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("list %s on the onboarding cluster: %w", gvk.Kind, err)
		}
		for _, o := range list.Items {
			left = append(left, fmt.Sprintf("%s remains", describeObject(&o, ClusterOnboarding)))
		}
	}
	if r.cl.BinaryOf != nil {
		if b, err := r.cl.BinaryOf(r.image); err == nil {
			if pids := processesOf(b, r.processDir()); len(pids) > 0 {
				left = append(left, fmt.Sprintf("processes of %s still run: %s", b, strings.Join(pids, ", ")))
			}
		}
	}
	return left, nil
}

// processDir is the directory a process of this run's provider names in
// its environment (the process deployer points KUBECONFIG into it), or ""
// when the target does not say where its providers live.
func (r *runner) processDir() string {
	if r.cl.LogDir == "" {
		return ""
	}
	return r.providerDir() + string(filepath.Separator)
}

// processesOf returns the ids of the processes whose executable is binary
// and, unless dir is "", whose environment names a path below dir: another
// landscape may run the same binary for a provider of the same name.
func processesOf(binary, dir string) []string {
	want, err := filepath.EvalSymlinks(binary)
	if err != nil {
		want = binary
	}
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		if exe != want && exe != binary && strings.TrimSuffix(exe, " (deleted)") != want {
			continue
		}
		if dir != "" {
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil || !strings.Contains(string(env), "="+dir) {
				continue
			}
		}
		pids = append(pids, e.Name())
	}
	return pids
}

// keptCRDs lists the CRDs on the platform and onboarding clusters of the
// groups of the provider's kinds (registered or applied): its init
// installed them, and they are not removed with it.
func (r *runner) keptCRDs(ctx context.Context) []string {
	groups := map[string]bool{}
	for _, gvk := range r.resources {
		groups[gvk.Group] = true
	}
	for _, obj := range append(slices.Clone(r.platformObjs), r.services...) {
		groups[obj.GroupVersionKind().Group] = true
	}
	var kept []string
	for _, c := range []*Cluster{r.cl.Platform, r.cl.Onboarding} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
		if err := c.Client.List(ctx, list); err != nil {
			continue
		}
		for _, crd := range list.Items {
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			if groups[group] {
				kept = append(kept, fmt.Sprintf("CRD %s on the %s cluster", crd.GetName(), c.Name))
			}
		}
	}
	slices.Sort(kept)
	return slices.Compact(kept)
}
