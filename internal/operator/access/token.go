package access

import (
	"context"
	"fmt"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

// token is a minted ServiceAccount token and its lifetime.
type token struct {
	value     string
	issued    time.Time
	expires   time.Time
	ttl       string // the TTL asked for, TokenTTLAnnotation
	accountID string // the ServiceAccount's UID, ServiceAccountUIDAnnotation
}

// refreshAt is when the token is replaced: after RefreshRatio of its
// lifetime.
func (t token) refreshAt() time.Time {
	life := t.expires.Sub(t.issued)
	return t.issued.Add(time.Duration(float64(life) * RefreshRatio))
}

// requestedTTL returns the token lifetime to ask for: spec.ttl, else
// DefaultTTL, at least MinTTL (the TokenRequest API refuses less). A
// spec.ttl that does not parse never gets here: Reconcile denies the
// request first (ttlError); should one, it gets DefaultTTL rather than a
// lifetime nobody asked for.
func requestedTTL(ar *clustersv1alpha1.AccessRequest) time.Duration {
	ttl := DefaultTTL
	if ar.Spec.TTL != nil {
		if d, err := ar.Spec.TTL.Parse(); err == nil {
			ttl = d
		}
	}
	return max(ttl, MinTTL)
}

// ttlError reports why spec.ttl is not a usable duration, or nil. The API
// server refuses such a value, but an AccessRequest stored before that rule
// existed may hold one; it still decodes (common.Duration), so only that
// request is denied and the controller's list of all requests keeps working.
func ttlError(ar *clustersv1alpha1.AccessRequest) error {
	return ar.Spec.TTL.Validate("spec.ttl")
}

// tokenFromSecret reads the token the Secret holds; ok is false when the
// Secret holds none or its timestamps cannot be read.
func tokenFromSecret(s *corev1.Secret) (token, bool) {
	if s == nil || len(s.Data[clustersv1alpha1.SecretKeyToken]) == 0 {
		return token{}, false
	}
	issued, err1 := strconv.ParseInt(string(s.Data[clustersv1alpha1.SecretKeyCreationTimestamp]), 10, 64)
	expires, err2 := strconv.ParseInt(string(s.Data[clustersv1alpha1.SecretKeyExpirationTimestamp]), 10, 64)
	if err1 != nil || err2 != nil || expires <= issued {
		return token{}, false
	}
	return token{
		value:     string(s.Data[clustersv1alpha1.SecretKeyToken]),
		issued:    time.Unix(issued, 0),
		expires:   time.Unix(expires, 0),
		ttl:       s.Annotations[TokenTTLAnnotation],
		accountID: s.Annotations[ServiceAccountUIDAnnotation],
	}, true
}

// reusable reports whether t can stay: it belongs to the current
// ServiceAccount, was minted for the current TTL and is not due yet.
func (t token) reusable(sa *corev1.ServiceAccount, ttl time.Duration, now time.Time) bool {
	return t.accountID == string(sa.UID) && t.ttl == ttl.String() && now.Before(t.refreshAt())
}

// mintToken asks the target cluster for a token of sa valid for ttl. The
// API server may grant a shorter lifetime; the token records the real one.
func mintToken(ctx context.Context, c client.Client, sa *corev1.ServiceAccount, ttl time.Duration, now time.Time) (token, error) {
	seconds := int64(ttl.Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return token{}, fmt.Errorf("request token for ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	if tr.Status.Token == "" {
		return token{}, fmt.Errorf("request token for ServiceAccount %s/%s: empty token", sa.Namespace, sa.Name)
	}
	return token{
		value:     tr.Status.Token,
		issued:    now,
		expires:   tr.Status.ExpirationTimestamp.Time,
		ttl:       ttl.String(),
		accountID: string(sa.UID),
	}, nil
}

// endpoint is where and how a target API server is reached.
type endpoint struct {
	clusterName string
	host        string
	ca          []byte
	serverName  string
	insecure    bool
}

// endpointFromConfig takes the server address and CA from the admin config,
// reading a CA file into memory.
func endpointFromConfig(clusterName string, cfg *rest.Config) (endpoint, error) {
	cfg = rest.CopyConfig(cfg)
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return endpoint{}, fmt.Errorf("read CA of %s: %w", cfg.Host, err)
	}
	return endpoint{
		clusterName: clusterName,
		host:        cfg.Host,
		ca:          cfg.CAData,
		serverName:  cfg.ServerName,
		insecure:    cfg.Insecure,
	}, nil
}

// kubeconfig renders a kubeconfig that authenticates with the token.
func kubeconfig(ep endpoint, user string, t token) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ep.clusterName] = &clientcmdapi.Cluster{
		Server:                   ep.host,
		CertificateAuthorityData: ep.ca,
		TLSServerName:            ep.serverName,
		InsecureSkipTLSVerify:    ep.insecure,
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: t.value}
	cfg.Contexts[ep.clusterName] = &clientcmdapi.Context{Cluster: ep.clusterName, AuthInfo: user}
	cfg.CurrentContext = ep.clusterName
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	return out, nil
}

// secretData is the content of the kubeconfig Secret.
func secretData(ep endpoint, user string, t token) (map[string][]byte, error) {
	kc, err := kubeconfig(ep, user, t)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		clustersv1alpha1.SecretKeyKubeconfig:          kc,
		clustersv1alpha1.SecretKeyToken:               []byte(t.value),
		clustersv1alpha1.SecretKeyHost:                []byte(ep.host),
		clustersv1alpha1.SecretKeyCA:                  ep.ca,
		clustersv1alpha1.SecretKeyExpirationTimestamp: []byte(strconv.FormatInt(t.expires.Unix(), 10)),
		clustersv1alpha1.SecretKeyCreationTimestamp:   []byte(strconv.FormatInt(t.issued.Unix(), 10)),
	}, nil
}
