package app

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	valid := func(mutate func(*Options)) Options {
		o := DefaultOptions()
		o.Username, o.Password = "u", "p"
		if mutate != nil {
			mutate(&o)
		}
		return o
	}
	tests := map[string]struct {
		reason  string
		opts    Options
		wantErr string
	}{
		"Defaults":          {reason: "Defaults with credentials are valid.", opts: valid(nil)},
		"NoCredentials":     {reason: "OSB requires authentication.", opts: valid(func(o *Options) { o.Password = "" }), wantErr: "credentials are required"},
		"SecretOnly":        {reason: "A credentials Secret replaces username and password.", opts: valid(func(o *Options) { o.Username, o.Password, o.CredentialsSecret = "", "", "ns/name" })},
		"SecretNotRef":      {reason: "The Secret is namespace/name.", opts: valid(func(o *Options) { o.CredentialsSecret = "name" }), wantErr: "namespace/name"},
		"BadVersion":        {reason: "The minimum version is MAJOR.MINOR.", opts: valid(func(o *Options) { o.MinAPIVersion = "2" }), wantErr: "--min-api-version"},
		"CertWithoutKey":    {reason: "TLS needs both files.", opts: valid(func(o *Options) { o.TLSCertFile = "c.pem" }), wantErr: "go together"},
		"BadVerbosity":      {reason: "Verbosity is one of three.", opts: valid(func(o *Options) { o.Verbosity = "TRACE" }), wantErr: "--verbosity"},
		"WriteBeforeSync":   {reason: "The write timeout must outlast a synchronous wait.", opts: valid(func(o *Options) { o.WriteTimeout = time.Second }), wantErr: "--write-timeout"},
		"NonPositiveLimits": {reason: "Limits must be positive.", opts: valid(func(o *Options) { o.MaxBodyBytes = 0 }), wantErr: "must be positive"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := tc.opts.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("%s\nvalidate() = %v", tc.reason, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("%s\nvalidate() = %v, want an error containing %q", tc.reason, err, tc.wantErr)
			}
		})
	}
	o := valid(nil)
	if _, err := o.validate(); err != nil || o.WriteTimeout != o.SyncTimeout+15*time.Second || o.ShutdownTimeout != o.SyncTimeout+10*time.Second {
		t.Errorf("derived timeouts: write %s, shutdown %s", o.WriteTimeout, o.ShutdownTimeout)
	}
}

func TestCommandFlags(t *testing.T) {
	cmd := NewCommand()
	for _, f := range []string{"kubeconfig", "onboarding-kubeconfig", "catalog-namespace", "bind-address", "metrics-bind-address",
		"tls-cert-file", "tls-key-file", "username", "password", "credentials-secret", "min-api-version", "max-body-bytes",
		"sync-timeout", "tombstone-ttl", "read-header-timeout", "read-timeout", "write-timeout", "idle-timeout", "shutdown-timeout", "verbosity"} {
		if cmd.Flags().Lookup(f) == nil {
			t.Errorf("flag --%s is missing", f)
		}
	}
}
