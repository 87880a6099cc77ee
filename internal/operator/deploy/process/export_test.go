package process

import (
	"context"
	"syscall"
)

// NamespaceFileError says why d starts processes without the
// service-account namespace file, or nil when it provides it.
func NamespaceFileError(d *Deployer) error {
	_, err := d.namespaceFile(context.Background())
	return err
}

// WithNamespaceFileCheck replaces the check whether the system allows the
// namespace file, to test what happens when it does not.
func WithNamespaceFileCheck(fn func() error) Option {
	return func(o *options) {
		o.namespaceFile = func(context.Context) (*syscall.SysProcAttr, error) { return nil, fn() }
	}
}
