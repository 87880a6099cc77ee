package landscape

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev2alpha1 "github.com/marketplane/marketplane/api/controlplane/v2alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/api/install"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// treeReadTimeout bounds each request of ReadTree to an API server, so
// that a cluster that hangs shows as an error line instead of stopping
// `status`.
const treeReadTimeout = 5 * time.Second

// The kinds the tree shows.
var (
	providerKinds = []schema.GroupVersionKind{
		providerv1alpha1.GroupVersion.WithKind("ServiceProvider"),
		providerv1alpha1.GroupVersion.WithKind("ClusterProvider"),
		providerv1alpha1.GroupVersion.WithKind("PlatformService"),
	}
	controlPlaneKinds = []schema.GroupVersionKind{
		corev2alpha1.GroupVersion.WithKind("ManagedControlPlane"),
		controlplanev2alpha1.GroupVersion.WithKind("ControlPlane"),
	}
	sfClusterKind  = resourcev1alpha1.GroupVersion.WithKind("SFCluster")
	sfPlanKind     = osbv1alpha1.GroupVersion.WithKind("SFPlan")
	sfInstanceKind = osbv1alpha1.GroupVersion.WithKind("SFServiceInstance")
	nodeKind       = schema.GroupVersionKind{Version: "v1", Kind: "Node"}
)

// ReadTree reads the tree of the landscape s: its record and, while it
// runs, the objects of its API servers, with the admin kubeconfigs of
// state.json. It only reads. What cannot be read becomes an error line of
// the cluster concerned.
func ReadTree(ctx context.Context, s *Status) *Tree {
	st := s.State
	t := &Tree{Dir: s.Dir, Running: s.Running, Phase: st.Phase}
	for _, p := range st.RecordedProcesses() {
		t.Processes++
		if controlplane.Alive(p) {
			t.Alive++
		}
	}
	r := &treeReader{clients: map[string]client.Client{}, errs: map[string][]string{}}
	for name, c := range st.Clusters {
		if !s.Running || !controlplane.Alive(c.APIServer) {
			continue
		}
		cl, err := adminClient(c.Kubeconfig)
		if err != nil {
			r.errs[name] = append(r.errs[name], err.Error())
			continue
		}
		r.clients[name] = cl
	}
	r.read(ctx)
	for _, name := range clusterOrder(st) {
		t.Clusters = append(t.Clusters, r.clusterNode(ctx, s, name))
	}
	if st.KCP != nil {
		t.Clusters = append(t.Clusters, kcpNode(ctx, s))
	}
	return t
}

// workspaceResource is kcp's Workspace, read without kcp's Go modules.
var workspaceResource = schema.GroupVersionResource{Group: "tenancy.kcp.io", Version: "v1alpha1", Resource: "workspaces"}

// kcpNode is the node of the kcp server with its workspaces (of the root
// workspace), one per MCP.
func kcpNode(ctx context.Context, s *Status) TreeNode {
	k := s.State.KCP
	n := TreeNode{Name: KCPProcess, State: "https://127.0.0.1:" + strconv.Itoa(k.SecurePort)}
	switch {
	case !s.Running:
		n.Detail = "not running"
		return n
	case !controlplane.Alive(k.Process):
		n.Detail = "kcp not running"
		return n
	}
	n.Detail = kcpReadyz(ctx, k) + "  MCP backend: every MCP is a workspace"
	cfg, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err == nil {
		cfg.Timeout = treeReadTimeout
		var dc *dynamic.DynamicClient
		if dc, err = dynamic.NewForConfig(cfg); err == nil {
			var list *unstructured.UnstructuredList
			if list, err = dc.Resource(workspaceResource).List(ctx, metav1.ListOptions{}); err == nil {
				items := list.Items
				slices.SortFunc(items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
				for _, ws := range items {
					n.Children = append(n.Children, TreeNode{Kind: "Workspace", Name: ws.GetName(), State: objectState(ws)})
				}
				n.Detail += "  " + plural(len(items), "workspace")
			}
		}
	}
	if err != nil {
		n.Children = append(n.Children, TreeNode{Kind: "error", Name: "list Workspaces: " + err.Error()})
	}
	return n
}

// clusterOrder is the landscape's own clusters, then the provisioned ones
// by name.
func clusterOrder(st *controlplane.State) []string {
	own := []string{ClusterPlatform, ClusterOnboarding, ClusterWorkload}
	out := slices.Clone(own)
	for _, name := range slices.Sorted(maps.Keys(st.Clusters)) {
		if !slices.Contains(own, name) {
			out = append(out, name)
		}
	}
	return slices.DeleteFunc(out, func(n string) bool { return st.Clusters[n] == nil })
}

// adminClient returns an uncached client for a kubeconfig, with every
// Marketplane type and a timeout per request.
func adminClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.Timeout = treeReadTimeout
	scheme, err := install.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// treeReader holds what was read from the API servers.
type treeReader struct {
	clients map[string]client.Client
	// errs are the read errors by cluster.
	errs map[string][]string

	providers     []unstructured.Unstructured
	sfClusters    []unstructured.Unstructured
	planNames     map[string]string
	controlPlanes []unstructured.Unstructured
	services      []unstructured.Unstructured
	instances     []unstructured.Unstructured
	// instancesRead is false when the instances could not be listed.
	instancesRead bool
	nodes         int
}

// read lists the objects the tree shows: providers, SFClusters and SFPlans
// on the platform cluster; control planes, the kinds the providers serve
// (their status.resources) and SFServiceInstances on the onboarding
// cluster; Nodes on the workload cluster.
func (r *treeReader) read(ctx context.Context) {
	r.planNames = map[string]string{}
	for _, gvk := range providerKinds {
		r.providers = append(r.providers, r.list(ctx, ClusterPlatform, gvk)...)
	}
	r.sfClusters = r.list(ctx, ClusterPlatform, sfClusterKind)
	for _, p := range r.list(ctx, ClusterPlatform, sfPlanKind) {
		id, _, _ := unstructured.NestedString(p.Object, "spec", "id")
		name, _, _ := unstructured.NestedString(p.Object, "spec", "name")
		r.planNames[id] = name
	}
	for _, gvk := range controlPlaneKinds {
		r.controlPlanes = append(r.controlPlanes, r.list(ctx, ClusterOnboarding, gvk)...)
	}
	for _, gvk := range r.serviceKinds() {
		r.services = append(r.services, r.list(ctx, ClusterOnboarding, gvk)...)
	}
	before := len(r.errs[ClusterOnboarding])
	r.instances = r.list(ctx, ClusterOnboarding, sfInstanceKind)
	r.instancesRead = r.clients[ClusterOnboarding] != nil && len(r.errs[ClusterOnboarding]) == before
	r.nodes = len(r.list(ctx, ClusterWorkload, nodeKind))
}

// serviceKinds are the kinds of service objects the providers registered
// (status.resources), without the SF kinds the tree shows on their own.
func (r *treeReader) serviceKinds() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, p := range r.providers {
		resources, _, _ := unstructured.NestedSlice(p.Object, "status", "resources")
		for _, res := range resources {
			m, ok := res.(map[string]any)
			if !ok {
				continue
			}
			gvk := schema.GroupVersionKind{Group: str(m["group"]), Version: str(m["version"]), Kind: str(m["kind"])}
			if gvk.Kind == "" || gvk.Group == osbv1alpha1.GroupVersion.Group || slices.Contains(out, gvk) {
				continue
			}
			out = append(out, gvk)
		}
	}
	return out
}

// list lists the objects of a kind on a cluster, sorted by namespace and
// name. A kind the cluster does not serve (its CRD is not installed) has
// no objects; other errors are recorded for the cluster's node.
func (r *treeReader) list(ctx context.Context, cluster string, gvk schema.GroupVersionKind) []unstructured.Unstructured {
	c := r.clients[cluster]
	if c == nil {
		return nil
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, l); err != nil {
		if !apimeta.IsNoMatchError(err) {
			r.errs[cluster] = append(r.errs[cluster], fmt.Sprintf("list %s: %v", gvk.Kind, err))
		}
		return nil
	}
	items := l.Items
	slices.SortFunc(items, func(a, b unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	return items
}

// clusterNode is the node of one cluster with what was read from it.
func (r *treeReader) clusterNode(ctx context.Context, s *Status, name string) TreeNode {
	c := s.State.Clusters[name]
	// The address first: its width is the same for every cluster, so the
	// health of each lines up.
	n := TreeNode{Name: name, State: "https://127.0.0.1:" + strconv.Itoa(c.Port)}
	switch {
	case !s.Running:
		n.Detail = "not running"
	case !controlplane.Alive(c.APIServer):
		n.Detail = "API server not running"
	default:
		n.Detail = readyz(ctx, c.Kubeconfig)
	}
	if c.Request != nil {
		n.Detail += "  for ClusterRequest " + c.Request.Namespace + "/" + c.Request.Name
	}
	switch name {
	case ClusterPlatform:
		n.Children = r.platformChildren(s.State)
	case ClusterOnboarding:
		n.Children = r.onboardingChildren()
	case ClusterWorkload:
		if r.clients[name] != nil {
			n.Detail += "  " + plural(r.nodes, "node")
		}
	}
	for _, e := range r.errs[name] {
		n.Children = append(n.Children, TreeNode{Kind: "error", Name: e})
	}
	return n
}

// platformChildren are the operator, the landscape's other processes
// (the broker), the providers and the SFClusters.
func (r *treeReader) platformChildren(st *controlplane.State) []TreeNode {
	var out []TreeNode
	replicas, alive := 0, 0
	var others []string
	for _, name := range slices.Sorted(maps.Keys(st.Processes)) {
		if !strings.HasPrefix(name, "operator-") {
			others = append(others, name)
			continue
		}
		replicas++
		if controlplane.Alive(st.Processes[name]) {
			alive++
		}
	}
	if replicas > 0 {
		leader := "no leader yet"
		if l := OperatorLeader(st); l != "" {
			leader = "leader " + l
		}
		out = append(out, TreeNode{Kind: "operator", State: fmt.Sprintf("%d/%d replicas running", alive, replicas), Detail: leader})
	}
	for _, name := range others {
		state := "not running"
		if controlplane.Alive(st.Processes[name]) {
			state = "running"
		}
		out = append(out, TreeNode{Kind: "process", Name: name, State: state, Detail: st.Endpoints[name]})
	}
	for _, p := range r.providers {
		n := TreeNode{Kind: p.GetKind(), Name: p.GetName(), State: objectState(p)}
		if image, _, _ := unstructured.NestedString(p.Object, "spec", "image"); image != "" {
			n.Detail = imageTag(image)
		}
		for _, c := range providerProblems(p) {
			n.Children = append(n.Children, TreeNode{Kind: "condition", Name: c.Type, State: "False (" + c.Reason + ")", Detail: c.Message})
		}
		out = append(out, n)
	}
	for _, c := range r.sfClusters {
		n := TreeNode{Kind: c.GetKind(), Name: namespaced(c), State: objectState(c)}
		count := 0
		if r.instancesRead {
			for _, i := range r.instances {
				if id, _, _ := unstructured.NestedString(i.Object, "spec", "clusterId"); id == c.GetName() {
					count++
				}
			}
		} else {
			n64, _, _ := unstructured.NestedInt64(c.Object, "status", "serviceInstanceCount")
			count = int(n64)
		}
		n.Detail = plural(count, "instance")
		out = append(out, n)
	}
	return out
}

// onboardingChildren are the control planes with the service objects of
// their name and namespace beneath them, the other service objects, and
// the SFServiceInstances.
func (r *treeReader) onboardingChildren() []TreeNode {
	var out []TreeNode
	used := make([]bool, len(r.services))
	for _, cp := range r.controlPlanes {
		n := TreeNode{Kind: cp.GetKind(), Name: namespaced(cp), State: objectState(cp)}
		for i, svc := range r.services {
			if svc.GetNamespace() == cp.GetNamespace() && svc.GetName() == cp.GetName() {
				used[i] = true
				n.Children = append(n.Children, TreeNode{Kind: svc.GetKind(), Name: namespaced(svc), State: objectState(svc)})
			}
		}
		out = append(out, n)
	}
	for i, svc := range r.services {
		if !used[i] {
			out = append(out, TreeNode{Kind: svc.GetKind(), Name: namespaced(svc), State: objectState(svc)})
		}
	}
	for _, in := range r.instances {
		n := TreeNode{Kind: in.GetKind(), Name: namespaced(in), State: objectState(in)}
		planID, _, _ := unstructured.NestedString(in.Object, "spec", "planId")
		var detail []string
		if plan := r.planNames[planID]; plan != "" {
			detail = append(detail, "plan "+plan)
		} else if planID != "" {
			detail = append(detail, "plan id "+planID)
		}
		if cluster, _, _ := unstructured.NestedString(in.Object, "spec", "clusterId"); cluster != "" {
			detail = append(detail, "on "+cluster)
		}
		n.Detail = strings.Join(detail, ", ")
		out = append(out, n)
	}
	return out
}

// objectState is an object's state in a word or two: status.state (the
// Service Fabrik kinds: the OSB view a broker's client sees, such as
// "succeeded" or "in progress"), else status.phase (the openMCP kinds),
// else its Ready condition.
func objectState(u unstructured.Unstructured) string {
	for _, field := range []string{"state", "phase"} {
		if v, _, _ := unstructured.NestedString(u.Object, "status", field); v != "" {
			return v
		}
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		if m["status"] == string(metav1.ConditionTrue) {
			return "Ready"
		}
		if reason := str(m["reason"]); reason != "" {
			return "not Ready (" + reason + ")"
		}
		return "not Ready"
	}
	return "no status yet"
}

// problemConditions are the provider conditions whose False says what
// stops the provider: init, a denied request, a refused registration.
var problemConditions = []string{"Initialized", "RequestsGranted", "ResourcesAccepted"}

// providerProblems returns the problem conditions of provider p that are
// False, in the order of problemConditions.
func providerProblems(p unstructured.Unstructured) []metav1.Condition {
	conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	var out []metav1.Condition
	for _, t := range problemConditions {
		for _, c := range conds {
			m, ok := c.(map[string]any)
			if ok && m["type"] == t && m["status"] == string(metav1.ConditionFalse) {
				out = append(out, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: str(m["reason"]), Message: str(m["message"])})
			}
		}
	}
	return out
}

// namespaced is namespace/name, or the name of a cluster-scoped object.
func namespaced(u unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// imageTag is the tag (or digest) of an image reference.
func imageTag(image string) string {
	if _, digest, ok := strings.Cut(image, "@"); ok {
		return digest
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return "latest"
}

// plural says "1 node", "2 nodes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// str is v as a string, or "".
func str(v any) string {
	s, _ := v.(string)
	return s
}
