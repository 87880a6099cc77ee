package sf

import (
	"errors"
	"time"

	"github.com/go-logr/logr"

	"github.com/marketplane/marketplane/internal/broker/osb"
)

// Defaults of the backend's options.
const (
	DefaultSyncTimeout  = 50 * time.Second
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultRecheckInterval is how often a request waiting for the
	// provisioner re-reads the object when the Store notifies it of
	// changes: only a safety net for a lost notification.
	DefaultRecheckInterval = 2 * time.Second
)

// Backend is the Service Fabrik backend of the OSB API: it records every
// request as an SFServiceInstance or SFServiceBinding through its Store and
// answers from their status.
type Backend struct {
	catalog osb.Catalog
	store   Store

	log          logr.Logger
	syncTimeout  time.Duration
	pollInterval time.Duration
	// recheckInterval replaces pollInterval with a Store that notifies
	// of changes.
	recheckInterval time.Duration
}

var _ osb.Backend = &Backend{}

// Option configures a Backend.
type Option func(*Backend)

// WithLogger sets the logger. Decisions are logged with the request
// identity; bodies, credentials and parameters never are.
func WithLogger(l logr.Logger) Option { return func(s *Backend) { s.log = l } }

// WithSyncTimeout bounds how long a request for a synchronous plan waits for
// the provisioner before it answers 202 (when the platform accepts
// asynchronous operations) or 504.
func WithSyncTimeout(d time.Duration) Option { return func(s *Backend) { s.syncTimeout = d } }

// WithPollInterval sets how often a waiting request looks at a store that
// does not notify of changes (see Notifier).
func WithPollInterval(d time.Duration) Option { return func(s *Backend) { s.pollInterval = d } }

// WithRecheckInterval sets how often a waiting request re-reads the object
// although its store (a Notifier) reported no change: the safety net for a
// lost notification.
func WithRecheckInterval(d time.Duration) Option { return func(s *Backend) { s.recheckInterval = d } }

// New returns the backend answering from cat and recording in store.
func New(cat osb.Catalog, store Store, opts ...Option) (*Backend, error) {
	if cat == nil || store == nil {
		return nil, errors.New("service fabrik backend: a catalog and a store are required")
	}
	s := &Backend{
		catalog:         cat,
		store:           store,
		log:             logr.Discard(),
		syncTimeout:     DefaultSyncTimeout,
		pollInterval:    DefaultPollInterval,
		recheckInterval: DefaultRecheckInterval,
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}
