package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Lifetimes of what this package issues. A landscape is a development
// tool; a certificate that comes close to its end is issued again when the
// landscape starts (see renewBefore).
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
	// renewBefore: a leaf certificate that expires sooner is issued again.
	renewBefore = 30 * 24 * time.Hour
	// clockSkew backdates certificates, so that a process whose clock is a
	// little behind accepts them at once.
	clockSkew = 5 * time.Minute
)

// PEM block types.
const (
	blockCertificate = "CERTIFICATE"
	blockECKey       = "EC PRIVATE KEY"
	blockPublicKey   = "PUBLIC KEY"
)

// Authority is a certificate authority whose files live in a directory.
type Authority struct {
	// CertFile and KeyFile are the PEM files of the CA.
	CertFile, KeyFile string
	// CertPEM is the CA certificate, the bundle clients trust.
	CertPEM []byte

	cert *x509.Certificate
	key  crypto.Signer
}

// Pair is a certificate and its key, as files and as PEM.
type Pair struct {
	// CertFile and KeyFile are the PEM files.
	CertFile, KeyFile string
	// CertPEM and KeyPEM are the files' contents.
	CertPEM, KeyPEM []byte
}

// Leaf describes a certificate an Authority issues.
type Leaf struct {
	// CommonName is the subject's CN: the user name for a client
	// certificate.
	CommonName string
	// Organizations are the subject's O: the groups for a client
	// certificate.
	Organizations []string
	// Server and Client select the extended key usages.
	Server, Client bool
	// IPs and DNSNames are the subject alternative names of a server
	// certificate.
	IPs      []net.IP
	DNSNames []string
}

// LoopbackServer is a server certificate for 127.0.0.1 and localhost.
func LoopbackServer(commonName string) Leaf {
	return Leaf{
		CommonName: commonName,
		Server:     true,
		IPs:        []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:   []string{"localhost"},
	}
}

// LoadOrCreateCA returns the CA stored as <dir>/<name>.crt and .key,
// creating both when either is missing or unusable.
func LoadOrCreateCA(dir, name, commonName string) (*Authority, error) {
	a := &Authority{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	if cert, key, certPEM, _, err := loadPair(a.CertFile, a.KeyFile); err == nil && cert.IsCA && time.Until(cert.NotAfter) > renewBefore {
		a.cert, a.key, a.CertPEM = cert, key, certPEM
		return a, nil
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"marketplane-landscape"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA %s: %w", name, err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: blockCertificate, Bytes: der})
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := writePair(a.CertFile, a.KeyFile, certPEM, keyPEM); err != nil {
		return nil, err
	}
	a.cert, a.key, a.CertPEM = cert, key, certPEM
	return a, nil
}

// Issue returns the certificate <dir>/<name>.crt with key <name>.key,
// issuing it when it is missing, not signed by a, does not match leaf's
// subject and alternative names, or expires soon.
func (a *Authority) Issue(dir, name string, leaf Leaf) (*Pair, error) {
	p := &Pair{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	if cert, _, certPEM, keyPEM, err := loadPair(p.CertFile, p.KeyFile); err == nil && a.issued(cert) && matches(cert, leaf) {
		p.CertPEM, p.KeyPEM = certPEM, keyPEM
		return p, nil
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: leaf.CommonName, Organization: leaf.Organizations},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		IPAddresses:  leaf.IPs,
		DNSNames:     leaf.DNSNames,
	}
	if leaf.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if leaf.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, fmt.Errorf("issue certificate %s: %w", name, err)
	}
	p.CertPEM = pem.EncodeToMemory(&pem.Block{Type: blockCertificate, Bytes: der})
	if p.KeyPEM, err = encodeKey(key); err != nil {
		return nil, err
	}
	if err := writePair(p.CertFile, p.KeyFile, p.CertPEM, p.KeyPEM); err != nil {
		return nil, err
	}
	return p, nil
}

// issued reports whether a signed cert and cert is not close to its end.
func (a *Authority) issued(cert *x509.Certificate) bool {
	return cert.CheckSignatureFrom(a.cert) == nil && time.Until(cert.NotAfter) > renewBefore
}

// matches reports whether cert was issued for leaf.
func matches(cert *x509.Certificate, leaf Leaf) bool {
	usage := func(u x509.ExtKeyUsage) bool { return slices.Contains(cert.ExtKeyUsage, u) }
	return cert.Subject.CommonName == leaf.CommonName &&
		slices.Equal(cert.Subject.Organization, leaf.Organizations) &&
		usage(x509.ExtKeyUsageServerAuth) == leaf.Server &&
		usage(x509.ExtKeyUsageClientAuth) == leaf.Client &&
		slices.EqualFunc(cert.IPAddresses, leaf.IPs, func(a, b net.IP) bool { return a.Equal(b) }) &&
		slices.Equal(cert.DNSNames, leaf.DNSNames)
}

// LoadOrCreateSigningKey returns the private and public key files of a
// service-account signing key, <dir>/<name>.key and <name>.pub, creating
// them when either is missing.
func LoadOrCreateSigningKey(dir, name string) (privateFile, publicFile string, err error) {
	privateFile, publicFile = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if key, err := loadKey(privateFile); err == nil {
		if pub, err := os.ReadFile(publicFile); err == nil {
			if want, err := encodePublic(key); err == nil && bytes.Equal(pub, want) {
				return privateFile, publicFile, nil
			}
		}
	}
	key, err := newKey()
	if err != nil {
		return "", "", err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return "", "", err
	}
	pubPEM, err := encodePublic(key)
	if err != nil {
		return "", "", err
	}
	if err := writePair(publicFile, privateFile, pubPEM, keyPEM); err != nil {
		return "", "", err
	}
	return privateFile, publicFile, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return key, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(fmt.Sprintf("random serial number: %v", err))
	}
	return n
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: blockECKey, Bytes: der}), nil
}

func encodePublic(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: blockPublicKey, Bytes: der}), nil
}

func loadKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != blockECKey {
		return nil, fmt.Errorf("%s: no %s block", path, blockECKey)
	}
	return x509.ParseECPrivateKey(block.Bytes)
}

// loadPair reads a certificate and its key and checks that they belong
// together.
func loadPair(certFile, keyFile string) (*x509.Certificate, crypto.Signer, []byte, []byte, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != blockCertificate {
		return nil, nil, nil, nil, fmt.Errorf("%s: no certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	key, err := loadKey(keyFile)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(key.Public()) {
		return nil, nil, nil, nil, errors.New("certificate and key do not match")
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cert, key, certPEM, keyPEM, nil
}

// writePair writes the key first, so that a crash between the two writes
// leaves a pair that does not match and is therefore created again.
func writePair(certFile, keyFile string, certPEM, keyPEM []byte) error {
	if err := WriteFileAtomic(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return WriteFileAtomic(certFile, certPEM, 0o600)
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory and a rename, creating the directory when missing: a reader
// sees the old or the new content, never a part.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp, perm)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
