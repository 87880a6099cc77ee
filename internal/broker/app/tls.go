package app

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certCheckInterval is how often the certificate files are checked for a
// change.
const certCheckInterval = 10 * time.Second

// certReloader serves the certificate of two PEM files and reloads it when
// either file changes (for example when cert-manager renews it). A reload
// that fails keeps the previous certificate.
type certReloader struct {
	certFile, keyFile string

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     string
	checkedAt time.Time
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	c := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certReloader) fileStamp() (string, error) {
	a, err := os.Stat(c.certFile)
	if err != nil {
		return "", err
	}
	b, err := os.Stat(c.keyFile)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%d/%d/%d", a.ModTime().UnixNano(), a.Size(), b.ModTime().UnixNano(), b.Size()), nil
}

func (c *certReloader) load() error {
	stamp, err := c.fileStamp()
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	c.cert, c.stamp, c.checkedAt = &cert, stamp, time.Now()
	return nil
}

// get implements tls.Config.GetCertificate.
func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checkedAt) >= certCheckInterval {
		c.checkedAt = time.Now()
		if stamp, err := c.fileStamp(); err == nil && stamp != c.stamp {
			_ = c.load()
		}
	}
	return c.cert, nil
}
