package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// The resources the console reads and writes.
var (
	offeringsGVR       = marketplacev1alpha1.GroupVersion.WithResource("offerings")
	instancesGVR       = osbv1alpha1.GroupVersion.WithResource("sfserviceinstances")
	bindingsGVR        = osbv1alpha1.GroupVersion.WithResource("sfservicebindings")
	serviceProviderGVR = providerv1alpha1.GroupVersion.WithResource("serviceproviders")
	sfClustersGVR      = resourcev1alpha1.GroupVersion.WithResource("sfclusters")
)

// userAgent names the console in the API servers' audit logs; the user is
// the token's.
const userAgent = "marketplane-console"

// kube holds one user's clients: every one of them carries the user's
// token and nothing else.
type kube struct {
	onboarding dynamic.Interface
	core       kubernetes.Interface
	platform   dynamic.Interface
	token      string
}

// leanList is a list of instances decoded into only the fields the
// instances page shows: decoding 1,000 whole objects (managed fields,
// parameters, applied specs) into maps was most of that page's time.
type leanList struct {
	Items []leanObject `json:"items"`
}

// leanObject is the part of an instance the instances page shows.
type leanObject struct {
	Metadata struct {
		Name              string       `json:"name"`
		Namespace         string       `json:"namespace"`
		CreationTimestamp metav1.Time  `json:"creationTimestamp"`
		DeletionTimestamp *metav1.Time `json:"deletionTimestamp,omitempty"`
	} `json:"metadata"`
	Spec struct {
		ServiceID string `json:"serviceId"`
		PlanID    string `json:"planId"`
	} `json:"spec"`
	Status objectStatus `json:"status"`
}

// listLean lists gvr in ns as the user, decoding only what leanObject
// holds. Errors are the API server's (apierrors work on them).
func (k *kube) listLean(ctx context.Context, gvr schema.GroupVersionResource, ns string) ([]leanObject, error) {
	raw, err := k.core.Discovery().RESTClient().Get().
		AbsPath("/apis", gvr.Group, gvr.Version, "namespaces", ns, gvr.Resource).
		DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var l leanList
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("decode the list of %s: %w", gvr.Resource, err)
	}
	return l.Items, nil
}

// restConfig returns the config of a request to c as the user of token:
// the address and trust of c, the token, no other credential. Client-side
// rate limiting is off, as for Marketplane's other clients: the API server's
// priority and fairness protects it.
func restConfig(c Cluster, token string) *rest.Config {
	return &rest.Config{
		Host:        c.Server,
		BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:     c.CAData,
			ServerName: c.TLSServerName,
		},
		UserAgent: userAgent,
		QPS:       -1,
	}
}

// newKube returns the clients of the user of token.
func (s *Server) newKube(token string) (*kube, error) {
	onb := restConfig(s.opts.Onboarding, token)
	dyn, err := dynamic.NewForConfig(onb)
	if err != nil {
		return nil, fmt.Errorf("client for the onboarding cluster: %w", err)
	}
	core, err := kubernetes.NewForConfig(onb)
	if err != nil {
		return nil, fmt.Errorf("client for the onboarding cluster: %w", err)
	}
	plat, err := dynamic.NewForConfig(restConfig(s.opts.Platform, token))
	if err != nil {
		return nil, fmt.Errorf("client for the platform cluster: %w", err)
	}
	return &kube{onboarding: dyn, core: core, platform: plat, token: token}, nil
}

// whoAmI asks the onboarding cluster who the token is (SelfSubjectReview),
// which also proves that the API server accepts it.
func (k *kube) whoAmI(ctx context.Context) (string, error) {
	r, err := k.core.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

// defaultNamespace is the namespace a ServiceAccount user starts in: its own.
func defaultNamespace(user string) string {
	if ns, _, err := serviceaccount.SplitUsername(user); err == nil {
		return ns
	}
	return ""
}

// fromUnstructured converts u into the typed object out.
func fromUnstructured(u *unstructured.Unstructured, out any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("decode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// toUnstructured converts a typed object for the dynamic client.
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

// apiError is what a page shows for an error: an HTTP status and a
// sentence, never a stack.
type apiError struct {
	Status  int
	Title   string
	Message string
}

// describeError turns an error of an API call about what into a readable
// message. The API server's own message is kept: it names the user, verb
// and resource (a 403's "User ... cannot delete resource ...") and never
// carries the token.
func describeError(what string, err error) apiError {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err):
		return apiError{http.StatusForbidden, "Not permitted", fmt.Sprintf("You are not permitted to %s. %s", what, serverMessage(err))}
	case apierrors.IsUnauthorized(err):
		return apiError{http.StatusUnauthorized, "Signed out", "The API server no longer accepts your token. Sign in again."}
	case apierrors.IsNotFound(err):
		return apiError{http.StatusNotFound, "Not found", fmt.Sprintf("Could not %s: %s", what, serverMessage(err))}
	case apierrors.IsAlreadyExists(err):
		return apiError{http.StatusConflict, "Already exists", serverMessage(err)}
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return apiError{http.StatusUnprocessableEntity, "Refused by the API server", fmt.Sprintf("Could not %s: %s", what, serverMessage(err))}
	case errors.Is(err, context.DeadlineExceeded):
		return apiError{http.StatusGatewayTimeout, "Timed out", fmt.Sprintf("The API server did not answer in time to %s.", what)}
	case errors.As(err, &status):
		return apiError{http.StatusBadGateway, "API server error", fmt.Sprintf("Could not %s: %s", what, serverMessage(err))}
	default:
		return apiError{http.StatusBadGateway, "API server unreachable", fmt.Sprintf("Could not %s: %s", what, redactURL(err.Error()))}
	}
}

// serverMessage is the API server's message of err.
func serverMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if m := status.Status().Message; m != "" {
			return m
		}
	}
	return redactURL(err.Error())
}

// redactURL keeps a transport error readable without echoing query
// strings (client-go errors name the request URL; the console never puts
// secrets there, but the rule is cheap).
func redactURL(msg string) string {
	if i := strings.Index(msg, "?"); i >= 0 {
		if j := strings.IndexAny(msg[i:], " \""); j > 0 {
			return msg[:i] + msg[i+j:]
		}
		return msg[:i]
	}
	return msg
}

// providerGVR returns the resource of an offered kind.
func providerGVR(k marketplacev1alpha1.OfferedKind) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Plural}
}
