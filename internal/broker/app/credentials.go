package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/internal/broker/osb"
)

// initialCredentials builds the authenticator from the Secret or the
// options. The Secret must be readable at start.
func initialCredentials(ctx context.Context, o Options, c client.Client) (*osb.BasicAuth, error) {
	if o.CredentialsSecret == "" {
		return osb.NewBasicAuth(o.Username, o.Password)
	}
	user, pass, err := readCredentials(ctx, o.CredentialsSecret, c)
	if err != nil {
		return nil, err
	}
	return osb.NewBasicAuth(user, pass)
}

func readCredentials(ctx context.Context, ref string, c client.Client) (string, string, error) {
	ns, name, _ := strings.Cut(ref, "/")
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		return "", "", fmt.Errorf("read credentials Secret %s: %w", ref, err)
	}
	user, pass := string(sec.Data[SecretKeyUsername]), string(sec.Data[SecretKeyPassword])
	if user == "" || pass == "" {
		return "", "", fmt.Errorf("credentials Secret %s: keys %s and %s must be set", ref, SecretKeyUsername, SecretKeyPassword)
	}
	return user, pass, nil
}

// refreshCredentials re-reads the credentials Secret until ctx ends, so
// that rotated credentials take effect without a restart. A failed read
// keeps the current credentials.
func refreshCredentials(ctx context.Context, o Options, c client.Client, auth *osb.BasicAuth, log logr.Logger) {
	t := time.NewTicker(o.CredentialsRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		user, pass, err := readCredentials(ctx, o.CredentialsSecret, c)
		if err != nil {
			log.Error(err, "Cannot re-read the credentials; keeping the current ones")
			continue
		}
		_ = auth.Set(user, pass)
	}
}
