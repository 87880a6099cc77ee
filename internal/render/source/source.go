package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/marketplane/marketplane/internal/render/internal/lru"
)

// Defaults of a Fetcher.
const (
	// DefaultHTTPTimeout bounds one http(s) request, body included.
	DefaultHTTPTimeout = 10 * time.Second
	// DefaultCacheTTL is how long a fetched http(s) body is served from the
	// cache before it is revalidated.
	DefaultCacheTTL = time.Minute
	// DefaultCacheBytes bounds the summed size of cached http(s) bodies.
	DefaultCacheBytes = 64 << 20
	// defaultCacheEntries bounds the number of cached http(s) bodies.
	defaultCacheEntries = 256
)

// ErrTooLarge is wrapped by the error of a fetch whose body exceeds the size
// limit.
var ErrTooLarge = errors.New("larger than the size limit")

// Error is the error of a failed fetch.
type Error struct {
	// URL is the fetched URL without user information and query string.
	URL string
	// Transient is true when the same fetch may succeed later: a network
	// error, a timeout, an HTTP 5xx or 429 answer, or a failure of the
	// ConfigMap reader other than NotFound. Anything else (a 404, a missing
	// file or key, a body over the size limit, a refused scheme) needs a
	// change to the plan or the installation.
	Transient bool
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("fetch %s: %v", e.URL, e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// IsTransient reports whether err, or an error it wraps, is a fetch *Error
// that may succeed when retried.
func IsTransient(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Transient
}

// Fetcher fetches template text and chart archives by URL. It is safe for
// concurrent use; concurrent fetches of one http(s) URL share one request.
type Fetcher struct {
	client     *http.Client
	timeout    time.Duration
	ttl        time.Duration
	fileRoots  []string
	configMaps ConfigMapGetter
	cache      *lru.Cache[string, *cached]
	group      singleflight.Group
	now        func() time.Time
}

// Option configures a Fetcher.
type Option func(*fetcherConfig)

type fetcherConfig struct {
	client     *http.Client
	timeout    time.Duration
	ttl        time.Duration
	cacheBytes int64
	fileRoots  []string
	configMaps ConfigMapGetter
}

// WithHTTPClient sets the client of http(s) fetches, for example one with a
// proxy or extra CA certificates. Its own Timeout still applies.
func WithHTTPClient(c *http.Client) Option { return func(o *fetcherConfig) { o.client = c } }

// WithHTTPTimeout bounds each http(s) request (DefaultHTTPTimeout).
func WithHTTPTimeout(d time.Duration) Option { return func(o *fetcherConfig) { o.timeout = d } }

// WithCacheTTL sets how long an http(s) body is served from the cache before
// it is revalidated (DefaultCacheTTL). Zero or less disables caching.
func WithCacheTTL(d time.Duration) Option { return func(o *fetcherConfig) { o.ttl = d } }

// WithCacheBytes bounds the summed size of cached http(s) bodies
// (DefaultCacheBytes).
func WithCacheBytes(n int64) Option { return func(o *fetcherConfig) { o.cacheBytes = n } }

// WithFileRoots allows file URLs below the given directories. Without it,
// file URLs are refused.
func WithFileRoots(dirs ...string) Option {
	return func(o *fetcherConfig) { o.fileRoots = append(o.fileRoots, dirs...) }
}

// WithConfigMapGetter enables configmap URLs, read through g.
func WithConfigMapGetter(g ConfigMapGetter) Option {
	return func(o *fetcherConfig) { o.configMaps = g }
}

// New returns a Fetcher.
func New(opts ...Option) *Fetcher {
	cfg := fetcherConfig{timeout: DefaultHTTPTimeout, ttl: DefaultCacheTTL, cacheBytes: DefaultCacheBytes}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.client == nil {
		cfg.client = &http.Client{}
	}
	roots := make([]string, 0, len(cfg.fileRoots))
	for _, r := range cfg.fileRoots {
		if abs, err := filepath.Abs(r); err == nil {
			roots = append(roots, filepath.Clean(abs))
		}
	}
	return &Fetcher{
		client:     cfg.client,
		timeout:    cfg.timeout,
		ttl:        cfg.ttl,
		fileRoots:  roots,
		configMaps: cfg.configMaps,
		cache:      lru.New[string, *cached](defaultCacheEntries, cfg.cacheBytes),
		now:        time.Now,
	}
}

// Fetch returns the content that rawURL names, at most maxBytes long. The
// returned slice may be shared with the cache and must not be modified.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string, maxBytes int64) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &Error{URL: "<unparsable url>", Err: errors.New("the url does not parse")}
	}
	shown := Redact(u)
	var body []byte
	switch u.Scheme {
	case "http", "https":
		body, err = f.fetchHTTP(ctx, u, maxBytes)
	case "file":
		body, err = f.fetchFile(u, maxBytes)
	case "configmap":
		body, err = f.fetchConfigMap(ctx, u, maxBytes)
	default:
		err = &Error{Err: fmt.Errorf("unsupported scheme %q: use http, https, file or configmap", u.Scheme)}
	}
	if err != nil {
		var fe *Error
		if !errors.As(err, &fe) {
			fe = &Error{Err: err}
		}
		fe.URL = shown
		return nil, fe
	}
	return body, nil
}

// Redact returns u without user information and query string, fit for
// errors, logs and status messages.
func Redact(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	c.Fragment = ""
	c.RawFragment = ""
	return c.String()
}

func tooLarge(maxBytes int64) error {
	return fmt.Errorf("%w of %d bytes", ErrTooLarge, maxBytes)
}
