package osb

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"sync/atomic"
)

// BasicAuth checks the HTTP basic credentials of every request. It compares
// SHA-256 digests in constant time, so neither the content nor the length
// of the credentials leaks through timing. The credentials can be replaced
// while the broker runs (rotation); they are never logged.
type BasicAuth struct {
	current atomic.Pointer[digests]
}

type digests struct {
	user, password [sha256.Size]byte
	// header is the digest of an Authorization header that carried these
	// credentials, so that later requests with the same header skip
	// decoding it. It is only ever set on a copy.
	header *[sha256.Size]byte
}

// ErrEmptyCredentials is returned for an empty username or password.
var ErrEmptyCredentials = errors.New("broker credentials must have a non-empty username and password")

// NewBasicAuth returns a BasicAuth accepting username and password.
func NewBasicAuth(username, password string) (*BasicAuth, error) {
	a := &BasicAuth{}
	if err := a.Set(username, password); err != nil {
		return nil, err
	}
	return a, nil
}

// Set replaces the accepted credentials.
func (a *BasicAuth) Set(username, password string) error {
	if username == "" || password == "" {
		return ErrEmptyCredentials
	}
	a.current.Store(&digests{user: sha256.Sum256([]byte(username)), password: sha256.Sum256([]byte(password))})
	return nil
}

// allows reports whether r carries the accepted credentials.
func (a *BasicAuth) allows(r *http.Request) bool {
	want := a.current.Load()
	header := r.Header.Get("Authorization")
	if want == nil || header == "" {
		return false
	}
	h := sha256.Sum256([]byte(header))
	if want.header != nil && subtle.ConstantTimeCompare(h[:], want.header[:]) == 1 {
		return true
	}
	user, password, ok := r.BasicAuth()
	if !ok {
		return false
	}
	u := sha256.Sum256([]byte(user))
	p := sha256.Sum256([]byte(password))
	// Both comparisons always run: & rather than &&.
	if subtle.ConstantTimeCompare(u[:], want.user[:])&subtle.ConstantTimeCompare(p[:], want.password[:]) != 1 {
		return false
	}
	// Remember the header, unless the credentials changed meanwhile.
	remembered := *want
	remembered.header = &h
	a.current.CompareAndSwap(want, &remembered)
	return true
}
