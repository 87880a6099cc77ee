package clusteraccess_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The landscape every integration test of the package shares, started on
// first use (unit tests run without it) and stopped by TestMain.
var (
	landscapeOnce sync.Once
	landscapeErr  error
	landscape     *providertest.Landscape
)

func TestMain(m *testing.M) {
	logf.SetLogger(testenv.Logger())
	code := m.Run()
	if landscape != nil {
		if err := landscape.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// env returns the shared landscape: platform, onboarding, one MCP cluster
// and a workload cluster. It skips the test under -short.
//
// The integration tests run in parallel, each as a provider of a namespace
// of its own; the tests that give an MCP the one MCP cluster hold it with
// useMCPCluster.
func env(t *testing.T) *providertest.Landscape {
	t.Helper()
	testenv.SkipIfShort(t)
	landscapeOnce.Do(func() {
		landscape, landscapeErr = providertest.New(providertest.WithWorkloadCluster(), providertest.WithLogger(logf.Log))
	})
	if landscapeErr != nil {
		t.Fatalf("landscape: %v", landscapeErr)
	}
	return landscape
}

// mcpCluster is held by the test whose MCP has the landscape's one MCP
// cluster.
var mcpCluster sync.Mutex

// useMCPCluster waits until no other test has an MCP and keeps the MCP
// cluster for the rest of the test and its clean-ups.
func useMCPCluster(t *testing.T) {
	t.Helper()
	mcpCluster.Lock()
	// Registered before the test's own clean-ups, so it runs after them.
	t.Cleanup(mcpCluster.Unlock)
}

// Timing of the tests' polls: generous, the machine is shared.
const (
	pollInterval = 200 * time.Millisecond
	pollTimeout  = 60 * time.Second
)

// eventually polls check until it returns nil, failing the test with the
// last error when it does not within pollTimeout.
func eventually(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	last := fmt.Errorf("not checked")
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		last = check(cctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

// The platform permissions of a provider's ServiceAccounts, as
// docs/operator.md ("Least privilege") documents and the operator grants
// them. The tests run the Manager with exactly these, so that it cannot
// rely on more than a deployed provider has.
var (
	namespaceRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	}
	// runClusterRules are cluster-wide rules of the run ServiceAccount.
	runClusterRules = []rbacv1.PolicyRule{
		{APIGroups: []string{clustersv1alpha1.GroupName}, Resources: []string{"clusters", "clusterrequests", "accessrequests"}, Verbs: []string{"get", "list", "watch"}},
	}
	// runRoleRules are the run ServiceAccount's rules in its namespace.
	runRoleRules = append([]rbacv1.PolicyRule{
		{APIGroups: []string{clustersv1alpha1.GroupName}, Resources: []string{"clusterrequests", "accessrequests"}, Verbs: []string{"create", "update", "patch", "delete"}},
	}, namespaceRules...)
	// initRoleRules are the init ServiceAccount's rules in its namespace
	// (it has no cluster-wide rules on the cluster APIs).
	initRoleRules = append([]rbacv1.PolicyRule{
		{APIGroups: []string{clustersv1alpha1.GroupName}, Resources: []string{"clusterrequests", "accessrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
	}, namespaceRules...)
)

// providerClient creates the ServiceAccount name in namespace on the
// platform cluster with the given rules (cluster-wide and in namespace) and
// returns a client that acts as it.
func providerClient(t *testing.T, l *providertest.Landscape, namespace, name string, clusterRules, roleRules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx := t.Context()
	c := l.Platform.Client
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	objs := []client.Object{
		sa,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Rules: roleRules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subjects,
		},
	}
	if len(clusterRules) > 0 {
		crName := "test:" + namespace + ":" + name
		objs = append(objs,
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crName}, Rules: clusterRules},
			&rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: crName},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: crName},
				Subjects:   subjects,
			})
		t.Cleanup(func() {
			for _, o := range objs[len(objs)-2:] {
				_ = c.Delete(context.Background(), o)
			}
		})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, client.ObjectKeyFromObject(o), err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(l.Platform.Config)
	cfg.BearerToken = tr.Status.Token
	pc, err := client.New(cfg, client.Options{Scheme: l.Platform.Scheme})
	if err != nil {
		t.Fatalf("provider client: %v", err)
	}
	return pc
}

// testObject is a minimal ServiceProviderAPI type; the Manager only reads
// its name and namespace.
type testObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	conditions        []metav1.Condition
	phase             spruntime.Phase
}

var _ spruntime.API = &testObject{}

func newObject(namespace, name string) *testObject {
	return &testObject{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
}

func (o *testObject) DeepCopyObject() runtime.Object {
	c := *o
	o.DeepCopyInto(&c.ObjectMeta)
	c.conditions = slices.Clone(o.conditions)
	return &c
}
func (o *testObject) GetConditions() *[]metav1.Condition { return &o.conditions }
func (o *testObject) GetPhase() spruntime.Phase          { return o.phase }
func (o *testObject) SetPhase(p spruntime.Phase)         { o.phase = p }
func (o *testObject) SetObservedGeneration(int64)        {}
