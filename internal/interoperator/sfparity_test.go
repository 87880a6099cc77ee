package interoperator_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/common"
	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/provisioner"
)

// The templates of a plan written the way Service Fabrik's zalando-postgres
// plan is: provision creates a postgresql object with spec.users and a
// Service; the sources name both, the Service as "service", like the
// template variable; bind reads the postgresql object from the sources and
// adds the binding's user with get/set and toYaml; unbind removes it; the
// status template reads both sources.
const (
	sfPostgresProvision = `{{- $name := "" }}
{{- with .instance.metadata.name }} {{ $name = . }} {{ end }}
apiVersion: acid.zalan.do/v1
kind: postgresql
metadata:
  name: pg-{{ $name }}
spec:
  teamId: sf
  numberOfInstances: 1
  users:
    admin:
    - superuser
  databases:
    app: admin
---
apiVersion: v1
kind: Service
metadata:
  name: pg-{{ $name }}
spec:
  ports:
  - port: 5432`

	sfPostgresSources = `{{- $name := "" }}
{{- with .instance.metadata.name }} {{ $name = . }} {{ end }}
postgresql:
  apiVersion: acid.zalan.do/v1
  kind: postgresql
  name: pg-{{ $name }}
service:
  apiVersion: v1
  kind: Service
  name: pg-{{ $name }}`

	// sfPostgresUser is the prelude of the bind and unbind templates: the
	// instance's name, the binding's user and the postgresql spec from the
	// sources. Without the sources, $spec stays a string and get fails
	// with "wrong type", as it did here before.
	sfPostgresUser = `{{- $name := "" }}
{{- with .instance.metadata.name }} {{ $name = . }} {{ end }}
{{- $user := "" }}
{{- with .binding.metadata.name }} {{ $user = . | replace "-" "_" }} {{ end }}
{{- $spec := "" }}
{{- with .postgresql }} {{ $spec = .spec }} {{ end }}
{{- $users := get $spec "users" }}
`
	sfPostgresBind = sfPostgresUser + `{{- $_ := set $users $user (list "login" "createdb") }}
apiVersion: acid.zalan.do/v1
kind: postgresql
metadata:
  name: pg-{{ $name }}
spec:
{{ toYaml $spec | indent 2 }}`

	sfPostgresUnbind = sfPostgresUser + `{{- $_ := unset $users $user }}
apiVersion: acid.zalan.do/v1
kind: postgresql
metadata:
  name: pg-{{ $name }}
spec:
{{ toYaml $spec | indent 2 }}`

	// The status template reads .service as the Kubernetes Service once it
	// exists: a source named like a variable replaces it.
	sfPostgresStatus = `{{- $state := "in progress" }}
{{- $kind := "" }}
{{- with .service }} {{ $kind = .kind }} {{ end }}
{{- if and .postgresql (eq $kind "Service") }} {{ $state = "succeeded" }} {{ end }}
provision:
  state: {{ $state }}
  response: {{ printf "postgresql ready, %s %s" $kind .service.metadata.name | quote }}
{{- $user := "" }}
{{- with .binding.metadata.name }} {{ $user = . | replace "-" "_" }} {{ end }}
{{- $bindState := "in progress" }}
{{- with .postgresql }} {{ if hasKey .spec.users $user }} {{ $bindState = "succeeded" }} {{ end }} {{ end }}
bind:
  state: {{ $bindState }}
  response: {{ dict "credentials" (dict "username" $user "host" (printf "%s.%s" .service.metadata.name .service.metadata.namespace) "sourceKind" $kind) | toJson | quote }}`
)

// The templates of a plan written the way Service Fabrik's director plan
// is, with ConfigMaps standing in for Director and DirectorBind: the
// sources name the instance's object and the binding's, whose name is empty
// until there is a binding (Service Fabrik skips such a source).
const (
	sfDirectorProvision = `{{ $name := "" }}
{{- with .instance.metadata.name }} {{ $name = . }} {{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: director-{{ $name }}
data:
  state: succeeded`

	sfDirectorSources = `{{- $name := "" }}
{{- $binding := "" }}
{{- with .instance.metadata.name }} {{ $name = . }} {{ end }}
{{- with .binding.metadata.name }} {{ $binding = . }} {{ end }}
director:
  apiVersion: v1
  kind: ConfigMap
  name: director-{{ $name }}
directorbind:
  apiVersion: v1
  kind: ConfigMap
  name: {{ $binding }}`

	sfDirectorBind = `{{ $name := "" }}
{{- with .instance.metadata.name }} {{ $name = . }} {{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .binding.metadata.name }}
data:
  state: succeeded
  response: {{ printf "{\"credentials\":{\"director\":\"%s\"}}" $name | quote }}`

	sfDirectorStatus = `{{- $stateString := "in progress" }}
{{- with .director.data }}
  {{- if eq .state "succeeded" }} {{ $stateString = "succeeded" }} {{ end }}
{{- end }}
provision:
  state: {{ $stateString }}
  response: director deployed
{{- $bindState := "in progress" }}
{{- $response := "" }}
{{- with .directorbind.data }}
  {{- if eq .state "succeeded" }} {{ $bindState = "succeeded" }} {{ $response = .response }} {{ end }}
{{- end }}
bind:
  state: {{ $bindState }}
  response: {{ $response | quote }}
{{- $unbindState := "delete" }}
{{- with .directorbind }}{{ else }} {{ $unbindState = "succeeded" }} {{ end }}
unbind:
  state: {{ $unbindState }}`
)

// installZalandoCRD installs a stand-in for Zalando's postgresql CRD on the
// target cluster.
func installZalandoCRD(t *testing.T) {
	t.Helper()
	installOpenCRD(t, "acid.zalan.do", "v1", "postgresql", "postgresqls")
}

// bindResponse returns the bind response of a succeeded binding.
func bindResponse(t *testing.T, e *env, binding string) map[string]any {
	t.Helper()
	secret := &corev1.Secret{}
	must(t, onboarding.Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: provisioner.BindingSecretPrefix + binding}, secret))
	var resp map[string]any
	if err := json.Unmarshal(secret.Data[osbv1alpha1.BindingSecretResponseKey], &resp); err != nil {
		t.Fatalf("the bind response of %s is not JSON: %v", binding, err)
	}
	return resp
}

// TestServiceFabrikPostgresPattern provisions, binds and unbinds with a plan
// written like Service Fabrik's zalando-postgres plan: the bind and unbind
// templates edit the postgresql object they read from the sources, and a
// source named "service" replaces the .service variable.
func TestServiceFabrikPostgresPattern(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	installZalandoCRD(t)
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.createService(t, "pg-svc")
	e.createPlan(t, "pg-plan", "pg-svc", []osbv1alpha1.TemplateSpec{
		gotemplate(osbv1alpha1.ActionProvision, sfPostgresProvision),
		gotemplate(osbv1alpha1.ActionSources, sfPostgresSources),
		gotemplate(osbv1alpha1.ActionBind, sfPostgresBind),
		gotemplate(osbv1alpha1.ActionUnbind, sfPostgresUnbind),
		gotemplate(osbv1alpha1.ActionStatus, sfPostgresStatus),
	})
	inst := e.createInstance(t, "pg-1", "pg-svc", "pg-plan", nil)
	got := e.waitInstance(t, "pg-1", osbv1alpha1.StateSucceeded)
	if want := "postgresql ready, Service pg-pg-1"; got.Status.Description != want {
		t.Errorf("description = %q, want %q: the status template reads the source \"service\" as .service", got.Status.Description, want)
	}

	users := func() map[string]any {
		pg := &unstructured.Unstructured{}
		pg.SetAPIVersion("acid.zalan.do/v1")
		pg.SetKind("postgresql")
		must(t, target.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "pg-pg-1"}, pg))
		u, _, _ := unstructured.NestedMap(pg.Object, "spec", "users")
		return u
	}

	e.createBinding(t, "bind-1", inst)
	e.waitBinding(t, "bind-1", osbv1alpha1.StateSucceeded)
	u := users()
	if _, ok := u["bind_1"]; !ok {
		t.Errorf("spec.users = %v, want the binding's user bind_1 that the bind template added", u)
	}
	if _, ok := u["admin"]; !ok {
		t.Errorf("spec.users = %v, want the provision's user admin kept", u)
	}
	creds, _ := bindResponse(t, e, "bind-1")["credentials"].(map[string]any)
	if creds["username"] != "bind_1" || creds["host"] != "pg-pg-1."+e.ns || creds["sourceKind"] != "Service" {
		t.Errorf("credentials = %v, want username bind_1, host pg-pg-1.%s and sourceKind Service (the source replaces .service)", creds, e.ns)
	}

	deleteAndWait(t, onboarding.Client, &osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "bind-1"}})
	u = users()
	if _, ok := u["bind_1"]; ok {
		t.Errorf("spec.users = %v after unbind, want the binding's user removed by the unbind template", u)
	}
	if _, ok := u["admin"]; !ok {
		t.Errorf("spec.users = %v after unbind, want the provision's user admin kept", u)
	}

	deleteAndWait(t, onboarding.Client, inst)
	svc := &corev1.Service{}
	if err := target.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "pg-pg-1"}, svc); !apierrors.IsNotFound(err) {
		t.Errorf("the instance's Service is still there after deprovision (err %v)", err)
	}
}

// TestServiceFabrikDirectorPattern provisions, binds and unbinds with a plan
// written like Service Fabrik's director plan, whose sources name the
// binding's object: empty before there is a binding, and skipped.
func TestServiceFabrikDirectorPattern(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.createService(t, "director-svc")
	e.createPlan(t, "director-plan", "director-svc", []osbv1alpha1.TemplateSpec{
		gotemplate(osbv1alpha1.ActionProvision, sfDirectorProvision),
		gotemplate(osbv1alpha1.ActionSources, sfDirectorSources),
		gotemplate(osbv1alpha1.ActionBind, sfDirectorBind),
		gotemplate(osbv1alpha1.ActionStatus, sfDirectorStatus),
	})
	inst := e.createInstance(t, "d-1", "director-svc", "director-plan", nil)
	got := e.waitInstance(t, "d-1", osbv1alpha1.StateSucceeded)
	if got.Status.Description != "director deployed" {
		t.Errorf("description = %q, want %q", got.Status.Description, "director deployed")
	}

	e.createBinding(t, "db-1", inst)
	e.waitBinding(t, "db-1", osbv1alpha1.StateSucceeded)
	creds, _ := bindResponse(t, e, "db-1")["credentials"].(map[string]any)
	if creds["director"] != "d-1" {
		t.Errorf("credentials = %v, want director d-1 from the DirectorBind stand-in", creds)
	}

	deleteAndWait(t, onboarding.Client, &osbv1alpha1.SFServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "db-1"}})
	if err := target.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "db-1"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the DirectorBind stand-in is still there after unbind (err %v)", err)
	}
	deleteAndWait(t, onboarding.Client, inst)
}

// TestClusterDeletionWakesWaitingInstances: with two SFClusters and no
// default an instance waits (NoClusterAvailable); deleting one lets the
// one left take it, at once and not after a poll interval.
func TestClusterDeletionWakesWaitingInstances(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{configSpec: func(s *interoperatorv1alpha1.ProviderConfigSpec) {
		// Far longer than the test: only the SFCluster watch can wake
		// the instance.
		s.PollInterval = common.DurationOf(time.Hour)
	}})
	ctx := context.Background()
	e.createCluster(t, "extra")
	e.createService(t, "svc")
	e.createPlan(t, "plan", "svc", []osbv1alpha1.TemplateSpec{
		gotemplate(osbv1alpha1.ActionProvision, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{{ .instance.metadata.name }}\n"),
	})
	e.createInstance(t, "waiting", "svc", "plan", nil)
	waitFor(t, "the instance to wait with NoClusterAvailable", func() bool {
		c := readyCondition(e.instance(t, "waiting").Status.Conditions)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "NoClusterAvailable"
	})

	must(t, platform.Client.Delete(ctx, &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: "extra"}}))
	got := e.waitInstance(t, "waiting", osbv1alpha1.StateSucceeded)
	if got.Spec.ClusterID != "target" {
		t.Errorf("spec.clusterId = %q, want target, the only SFCluster left", got.Spec.ClusterID)
	}
}

// TestInstanceWithoutSpec: an SFServiceInstance without spec is accepted,
// as Service Fabrik's CRD accepts it, and fails with a reason that says
// what it lacks; it can be deleted.
func TestInstanceWithoutSpec(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(osbv1alpha1.GroupVersion.String())
	u.SetKind("SFServiceInstance")
	u.SetNamespace(e.ns)
	u.SetName("no-spec")
	if err := onboarding.Client.Create(ctx, u); err != nil {
		t.Fatalf("the API server refuses an SFServiceInstance without spec, which Service Fabrik's CRD accepts: %v", err)
	}
	var got *osbv1alpha1.SFServiceInstance
	waitFor(t, "Ready=False with reason MissingServiceOrPlan", func() bool {
		got = e.instance(t, "no-spec")
		c := readyCondition(got.Status.Conditions)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(provisioner.ReasonMissingServiceOrPlan)
	})
	if c := readyCondition(got.Status.Conditions); !strings.Contains(c.Message, "spec.serviceId and spec.planId") {
		t.Errorf("Ready message = %q, want it to name the missing fields", c.Message)
	}
	// The broker reports the state: failed, not an operation in progress
	// that never ends.
	got = e.waitInstance(t, "no-spec", osbv1alpha1.StateFailed)
	e.expectQuiet(t, "an instance without spec")
	deleteAndWait(t, onboarding.Client, got)
}
