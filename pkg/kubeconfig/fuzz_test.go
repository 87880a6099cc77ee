package kubeconfig

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// fuzzSecret is the credential in the fuzz seeds. Wherever the fuzzer
// moves it, an error of Parse must not quote it.
const fuzzSecret = "fuzz-s3cret-7f3a"

// FuzzParse parses fuzzed kubeconfigs, as Marketplane reads them from
// Secrets anyone with write access to the Secret controls. Parse must not
// panic; a config it accepts has a server and no credential plugin; an
// error never quotes the credential the input holds.
//
// go test ./pkg/kubeconfig -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	for _, seed := range [][]byte{
		kc("https://127.0.0.1:6443", "{token: "+fuzzSecret+"}"),
		kc("https://x", "{username: a, password: "+fuzzSecret+"}"),
		kc("https://x", "{client-key-data: "+fuzzSecret+"}"),
		kc(fuzzSecret, "{token: t}"),
		kc("https://x", "{exec: {apiVersion: client.authentication.k8s.io/v1, command: "+fuzzSecret+"}}"),
		kc("https://x", "{auth-provider: {name: oidc, config: {id-token: "+fuzzSecret+"}}}"),
		kc("https://x", "{tokenFile: /"+fuzzSecret+"}"),
		[]byte("current-context: " + fuzzSecret + "\n"),
		[]byte(fuzzSecret + ": [unclosed"),
		[]byte(`{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://x","certificate-authority-data":"` + fuzzSecret + `"}}]}`),
		nil,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			if strings.Contains(err.Error(), fuzzSecret) && !quotable(data) {
				t.Fatalf("the error quotes the credential: %v", err)
			}
			return
		}
		if cfg.Host == "" {
			t.Fatalf("accepted a config without a server")
		}
		if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
			t.Fatalf("accepted a credential plugin")
		}
	})
}

// quotable reports whether the fuzz secret appears in data outside the
// users' credentials: in names, servers, namespaces or file paths, which
// error messages may quote. Input that does not parse is never quotable:
// Parse then says only ErrUnparsable.
func quotable(data []byte) bool {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return false
	}
	for _, u := range raw.AuthInfos {
		// What is left of a user once its credentials are dropped.
		*u = clientcmdapi.AuthInfo{ClientCertificate: u.ClientCertificate, ClientKey: u.ClientKey, TokenFile: u.TokenFile,
			Impersonate: u.Impersonate, ImpersonateUID: u.ImpersonateUID, ImpersonateGroups: u.ImpersonateGroups}
	}
	rest, err := clientcmd.Write(*raw)
	return err != nil || bytes.Contains(rest, []byte(fuzzSecret))
}
