package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/marketplane/marketplane/pkg/apiserverprofile"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// TestSmallProfile starts a cluster recorded for a ClusterRequest, as the
// local cluster provider does, and checks that it runs the small profile
// (its API server leaves out the groups of nodes, storage and certificates,
// and its processes get the Go runtime settings) and still serves what
// openMCP providers and tenants use: CRDs and their objects, RBAC, Leases,
// service-account tokens that authenticate, and namespace deletion.
func TestSmallProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and an API server; run without -short")
	}
	bins := testBinaries(t)
	layout := Layout{Dir: t.TempDir()}
	ports, err := FreePorts(3)
	must(t, err)
	store := NewStore(layout.Dir, &State{
		Etcd: Etcd{ClientPort: ports[0], PeerPort: ports[1], DataDir: layout.EtcdDataDir()},
		Clusters: map[string]*Cluster{"mcp-1": {
			Name: "mcp-1", Port: ports[2], EtcdPrefix: EtcdPrefix("mcp-1"),
			Request: &RequestRef{Namespace: "tenant", Name: "mcp", UID: "uid-1", Purposes: []string{"mcp"}},
		}},
	})
	cp := New(layout, bins, store, WithStartTimeout(2*time.Minute), WithStopTimeout(5*time.Second))
	t.Cleanup(func() { _ = cp.Stop(); cp.Close() })
	ctx := t.Context()
	must(t, cp.EnsurePKI())
	must(t, cp.StartEtcd(ctx))
	rc, err := cp.StartCluster(ctx, "mcp-1")
	must(t, err)

	t.Run("its processes get the small flags and Go runtime settings", func(t *testing.T) {
		args := cmdline(t, rc.apiServer.PID())
		for _, want := range smallAPIServerArgs() {
			if !slices.Contains(args, want) {
				t.Errorf("kube-apiserver lacks %s; its arguments: %v", want, args)
			}
		}
		env := environ(t, rc.apiServer.PID())
		for _, kv := range SmallAPIServerEnv {
			if !slices.Contains(env, kv) {
				t.Errorf("kube-apiserver lacks %s in its environment: %v", kv, env)
			}
		}
		for _, p := range []*Proc{rc.apiServer, rc.controllerManager} {
			n, err := supervisor.ResidentMemory(p.PID())
			must(t, err)
			t.Logf("%s: %d MiB resident", p.Record.Name, n>>20)
		}
	})

	cs := kubernetes.NewForConfigOrDie(rc.Config)
	t.Run("it serves the groups providers and tenants use, and not the others", func(t *testing.T) {
		groups, err := cs.Discovery().ServerGroups()
		must(t, err)
		served := map[string]bool{}
		for _, g := range groups.Groups {
			for _, v := range g.Versions {
				served[v.GroupVersion] = true
			}
		}
		for _, gv := range apiserverprofile.Groups {
			if !served[gv] {
				t.Errorf("%s is not served; served: %v", gv, served)
			}
		}
		for _, gv := range []string{"storage.k8s.io/v1", "certificates.k8s.io/v1", "node.k8s.io/v1", "scheduling.k8s.io/v1", "autoscaling/v2", "flowcontrol.apiserver.k8s.io/v1"} {
			if served[gv] {
				t.Errorf("%s is served by a small cluster", gv)
			}
		}
	})

	t.Run("CRDs, RBAC, Leases and service-account tokens work", func(t *testing.T) {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr(true),
					}},
				}},
			},
		}
		_, err := apiextensionsclient.NewForConfigOrDie(rc.Config).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		must(t, err)
		widgets := dynamic.NewForConfigOrDie(rc.Config).Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
		widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}}
		poll(t, "a Widget can be created once the CRD is established", func() error {
			_, err := widgets.Create(ctx, widget, metav1.CreateOptions{})
			return err
		})

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
		_, err = cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		must(t, err)
		_, err = cs.CoordinationV1().Leases("team").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader"}}, metav1.CreateOptions{})
		must(t, err)
		_, err = cs.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "provider"}}, metav1.CreateOptions{})
		must(t, err)
		_, err = cs.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "create"}}},
		}, metav1.CreateOptions{})
		must(t, err)
		_, err = cs.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "widgets"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "provider", Namespace: "team"}},
		}, metav1.CreateOptions{})
		must(t, err)
		tok, err := cs.CoreV1().ServiceAccounts("team").CreateToken(ctx, "provider", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		must(t, err)

		// The token authenticates and RBAC grants it the Role's rules
		// only.
		asSA := rest.AnonymousClientConfig(rc.Config)
		asSA.BearerToken = tok.Status.Token
		saWidgets := dynamic.NewForConfigOrDie(asSA).Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("team")
		poll(t, "the service account creates a Widget in its namespace", func() error {
			_, err := saWidgets.Create(ctx, widget, metav1.CreateOptions{})
			return err
		})
		if _, err := kubernetes.NewForConfigOrDie(asSA).CoreV1().Secrets("team").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the service account listed Secrets: %v; want Forbidden", err)
		}
		review, err := kubernetes.NewForConfigOrDie(asSA).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		must(t, err)
		if want := "system:serviceaccount:team:provider"; review.Status.UserInfo.Username != want {
			t.Errorf("the token authenticates as %q, want %q", review.Status.UserInfo.Username, want)
		}

		// kube-controller-manager empties and removes a deleted
		// namespace.
		must(t, cs.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}))
		poll(t, "namespace team to be gone", func() error {
			_, err := cs.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return fmt.Errorf("get namespace team: %w", err)
			}
			return errors.New("namespace team still there")
		})
	})
}

// poll retries fn until it returns nil, for up to a minute: the shared
// test machine may be slow to establish a CRD or finalize a namespace.
func poll(t *testing.T, what string, fn func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = fn()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %v", what, err, last)
	}
}

func ptr[T any](v T) *T { return &v }

// cmdline returns the arguments of a process.
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	must(t, err)
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
}

// environ returns the environment of a process.
func environ(t *testing.T, pid int) []string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	must(t, err)
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
}
