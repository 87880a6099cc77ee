package kubeconfig

import (
	"errors"
	"strings"
	"testing"
)

const base = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %SERVER%}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: %USER%}]
`

func kc(server, user string) []byte {
	return []byte(strings.NewReplacer("%SERVER%", server, "%USER%", user).Replace(base))
}

func TestParse(t *testing.T) {
	cases := map[string]struct {
		data    []byte
		wantErr error
	}{
		"Token":        {data: kc("https://127.0.0.1:6443", "{token: s3cret}")},
		"Empty":        {data: nil, wantErr: ErrEmpty},
		"Garbage":      {data: []byte("s3cret: [unclosed"), wantErr: ErrUnparsable},
		"NoServer":     {data: kc(`""`, "{token: s3cret}"), wantErr: ErrNoServer},
		"Exec":         {data: kc("https://x", "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}}"), wantErr: ErrPlugin},
		"AuthProvider": {data: kc("https://x", "{auth-provider: {name: oidc}}"), wantErr: ErrPlugin},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := Parse(tc.data)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Parse: want %v, got %v", tc.wantErr, err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error quotes the secret input: %v", err)
				}
				return
			}
			if err != nil || cfg.BearerToken != "s3cret" {
				t.Fatalf("Parse: %v, token %q", err, cfg.BearerToken)
			}
		})
	}
}
