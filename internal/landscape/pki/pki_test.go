package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIssue(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	admin := Leaf{CommonName: "admin", Organizations: []string{"system:masters"}, Client: true}
	first, err := ca.Issue(dir, "admin", admin)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason  string
		prepare func(t *testing.T)
		ca      func(t *testing.T) *Authority
		leaf    Leaf
		reissue bool
	}{
		"Same": {
			reason: "an existing certificate that fits is reused, so identities survive a restart",
			ca:     func(*testing.T) *Authority { return ca },
			leaf:   admin,
		},
		"OtherSubject": {
			reason:  "a certificate for another subject is issued again",
			ca:      func(*testing.T) *Authority { return ca },
			leaf:    Leaf{CommonName: "admin", Client: true},
			reissue: true,
		},
		"OtherCA": {
			reason: "a certificate the CA did not sign is issued again",
			ca: func(t *testing.T) *Authority {
				other, err := LoadOrCreateCA(t.TempDir(), "ca", "other")
				if err != nil {
					t.Fatal(err)
				}
				return other
			},
			leaf:    admin,
			reissue: true,
		},
		"KeyLost": {
			reason: "a certificate whose key is gone is issued again",
			prepare: func(t *testing.T) {
				if err := os.Remove(filepath.Join(dir, "admin.key")); err != nil {
					t.Fatal(err)
				}
			},
			ca:      func(*testing.T) *Authority { return ca },
			leaf:    admin,
			reissue: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Every case starts from the first certificate.
			if err := WriteFileAtomic(first.KeyFile, first.KeyPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := WriteFileAtomic(first.CertFile, first.CertPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.prepare != nil {
				tc.prepare(t)
			}
			a := tc.ca(t)
			got, err := a.Issue(dir, "admin", tc.leaf)
			if err != nil {
				t.Fatal(err)
			}
			if reissued := !bytes.Equal(got.CertPEM, first.CertPEM); reissued != tc.reissue {
				t.Errorf("%s: reissued = %v, want %v", tc.reason, reissued, tc.reissue)
			}
			block, _ := pem.Decode(got.CertPEM)
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.leaf.Organizations, cert.Subject.Organization); diff != "" {
				t.Errorf("organizations (-want +got):\n%s", diff)
			}
			if err := cert.CheckSignatureFrom(a.cert); err != nil {
				t.Errorf("not signed by the CA: %v", err)
			}
			if fi, err := os.Stat(got.KeyFile); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("key file mode: %v, %v; want 0600", fi.Mode(), err)
			}
		})
	}
}

func TestLoadOrCreateSigningKey(t *testing.T) {
	dir := t.TempDir()
	priv, pub, err := LoadOrCreateSigningKey(dir, "sa")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(pub)
	if _, _, err := LoadOrCreateSigningKey(dir, "sa"); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(pub); !bytes.Equal(before, after) {
		t.Error("an existing signing key was replaced")
	}
	if err := os.Remove(priv); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateSigningKey(dir, "sa"); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(pub); bytes.Equal(before, after) {
		t.Error("the public key was kept although its private key was lost")
	}
}
