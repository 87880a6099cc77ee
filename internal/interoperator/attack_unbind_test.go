package interoperator_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// TestAttackCredentialsAfterUnbind is issue #32's attack "credentials used
// after unbind", through the OSB API: the real broker in front of the real
// inter-operator and the sample plan "small". A tenant binds, uses the
// token against the target API server, and keeps using it from another
// goroutine while the platform unbinds. No request the token sends after
// the broker answered the unbind succeeds (401 or 403), the token is
// rejected with 401 within the API server's token cache TTL (10 s, fixed
// in kube-apiserver), and nothing the binding was given remains: its
// ServiceAccount, token Secret and RoleBinding on the target, its
// SFServiceBinding and bind response Secret on the onboarding cluster, and
// the binding in the broker's answers.
//
// What TestBindingIsolation (UnbindRevokes) and TestLifecycleSecretsNeverLeak
// already show is not repeated: the first unbinds by deleting the
// SFServiceBinding, without the broker, and checks the tokens the binding
// minted; the second unbinds through the broker and waits for 401, without
// asking whether the token still worked in between.
func TestAttackCredentialsAfterUnbind(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	// Fresh ids, so that the test can run again (-count) beside the
	// tombstones of its last run.
	run := randomHex(t, 6)
	id, bid := "6f1e2d3c-0000-4000-8000-"+run, "7a2b3c4d-0000-4000-8000-"+run
	e := newEnv(t, envOptions{namespace: sf.InstanceNamespace(id)})
	applySamplePlanSmall(t, e)
	ctx := context.Background()
	osb := startBroker(t, e.catalog, "platform", randomHex(t, 24), logr.Discard())
	query := "service_id=" + sampleServiceID + "&plan_id=" + samplePlanSmall
	osb.expect(http.MethodPut, "/v2/service_instances/"+id, map[string]any{"service_id": sampleServiceID, "plan_id": samplePlanSmall,
		"organization_guid": "org-1", "space_guid": "space-1"}, http.StatusCreated)
	t.Cleanup(func() {
		osb.expect(http.MethodDelete, "/v2/service_instances/"+id+"?"+query, nil, http.StatusOK)
	})
	response := osb.expect(http.MethodPut, "/v2/service_instances/"+id+"/service_bindings/"+bid,
		map[string]any{"service_id": sampleServiceID, "plan_id": samplePlanSmall}, http.StatusCreated)
	var creds credentials
	must(t, json.Unmarshal(response, &creds))
	ns, credsNS, sa := "sf-"+id, credentialsNamespace(id), "binding-"+bid

	// The tenant's token works: the precondition of the attack.
	use := tokenUser(t, creds.Credentials.APIServer, creds.Credentials.CAData, creds.Credentials.Token, ns)
	if code := use(); code != http.StatusOK {
		t.Fatalf("the bound token lists ConfigMaps in %s: %d, want 200", ns, code)
	}

	// The tenant keeps using the token while the platform unbinds.
	type attempt struct {
		start time.Time
		code  int
	}
	var (
		mu       sync.Mutex
		attempts []attempt
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// One request every 20 ms: as fast as a client polls, without
		// loading the shared machine's API server.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			start := time.Now()
			code := use()
			mu.Lock()
			attempts = append(attempts, attempt{start, code})
			mu.Unlock()
		}
	}()
	osb.expect(http.MethodDelete, "/v2/service_instances/"+id+"/service_bindings/"+bid+"?"+query, nil, http.StatusOK)
	unbound := time.Now()

	// 401 once the API server's token cache no longer holds the token.
	var rejected time.Duration
	waitFor(t, "the unbound token to be rejected with 401", func() bool {
		if use() == http.StatusUnauthorized {
			rejected = time.Since(unbound)
			return true
		}
		return false
	})
	close(stop)
	wg.Wait()
	t.Logf("after the unbind answered: 401 after %s", rejected.Round(time.Millisecond))
	if rejected > 30*time.Second {
		t.Errorf("the token was rejected with 401 only %s after unbind, want within the API server's token cache TTL (10 s)", rejected)
	}
	var before, after int
	codes := map[int]int{}
	for _, a := range attempts {
		if a.start.Before(unbound) {
			before++
			continue
		}
		after++
		codes[a.code]++
		if a.code != http.StatusUnauthorized && a.code != http.StatusForbidden {
			t.Errorf("a request the token sent %s after the unbind answered got %d, want 401 or 403", a.start.Sub(unbound).Round(time.Millisecond), a.code)
		}
	}
	t.Logf("requests with the token: %d while unbinding, %d after (by status: %v)", before, after, codes)
	if after == 0 {
		t.Error("the token was not used after the unbind answered: the test proves nothing")
	}

	// Nothing the binding was given remains.
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: credsNS, Name: sa}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: credsNS, Name: sa + "-token"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
	} {
		if err := target.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s of the binding remains on the target after unbind (%v)", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	rbs := &rbacv1.RoleBindingList{}
	must(t, target.Client.List(ctx, rbs))
	for _, rb := range rbs.Items {
		if slices.ContainsFunc(rb.Subjects, func(s rbacv1.Subject) bool { return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa }) {
			t.Errorf("RoleBinding %s/%s still names the binding's ServiceAccount", rb.Namespace, rb.Name)
		}
	}
	// The broker keeps the SFServiceBinding as a tombstone for a while
	// (last_operation answers "succeeded" from it): deleted, with no
	// finalizer but the broker's. The provisioner writes no status once
	// it released the binding, so the status may still name the response
	// Secret, which is gone (below).
	key := sf.BindingKey(id, bid)
	b := &osbv1alpha1.SFServiceBinding{}
	if err := onboarding.Client.Get(ctx, key, b); err == nil {
		if b.DeletionTimestamp == nil || !slices.Equal(b.Finalizers, []string{osbv1alpha1.FinalizerBroker}) {
			t.Errorf("the SFServiceBinding %s after unbind is no tombstone: deleting %v, finalizers %v",
				key, b.DeletionTimestamp != nil, b.Finalizers)
		}
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: provisioner.BindingSecretName(&osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: key.Name}})}}
	if err := onboarding.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); !apierrors.IsNotFound(err) {
		t.Errorf("the bind response Secret %s remains after unbind (%v)", client.ObjectKeyFromObject(secret), err)
	}
	osb.expect(http.MethodGet, "/v2/service_instances/"+id+"/service_bindings/"+bid, nil, http.StatusNotFound)
}

// tokenUser returns a function that lists the ConfigMaps of namespace on the
// API server with token, over plain HTTP with no client-side retry or
// cache, and returns the status code (0 when the request failed).
func tokenUser(t *testing.T, server, caData, token, namespace string) func() int {
	t.Helper()
	ca, err := base64.StdEncoding.DecodeString(caData)
	must(t, err)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("the bind response's CA holds no certificate")
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return func() int {
		req, err := http.NewRequest(http.MethodGet, server+"/api/v1/namespaces/"+namespace+"/configmaps", nil)
		if err != nil {
			return 0
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
}
