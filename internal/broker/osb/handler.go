package osb

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/marketplane/marketplane/internal/broker/catalog"
)

// Catalog supplies the current catalog snapshot.
type Catalog interface {
	Snapshot() *catalog.Snapshot
}

// CatalogFn adapts a function to Catalog.
type CatalogFn func() *catalog.Snapshot

// Snapshot implements Catalog.
func (f CatalogFn) Snapshot() *catalog.Snapshot { return f() }

// DefaultMaxBodyBytes is the default limit of request bodies.
const DefaultMaxBodyBytes = 1 << 20

// Handler is the OSB API over net/http: it runs the checks every request
// passes, decodes the request once and hands it to its Backend.
type Handler struct {
	catalog Catalog
	backend Backend
	auth    *BasicAuth
	mux     *http.ServeMux
	// unclean answers paths that are not in canonical form, which the mux
	// would redirect without the checks every request passes.
	unclean http.Handler

	log          logr.Logger
	metrics      *Metrics
	minVersion   APIVersion
	maxBodyBytes int64
}

var _ http.Handler = &Handler{}

// Option configures a Handler.
type Option func(*Handler)

// WithLogger sets the logger. Requests are logged with their request
// identity; bodies, credentials and parameters never are.
func WithLogger(l logr.Logger) Option { return func(s *Handler) { s.log = l } }

// WithMetrics records request counts and latencies in m.
func WithMetrics(m *Metrics) Option { return func(s *Handler) { s.metrics = m } }

// WithMinAPIVersion sets the oldest X-Broker-API-Version accepted
// (DefaultMinAPIVersion by default).
func WithMinAPIVersion(v APIVersion) Option { return func(s *Handler) { s.minVersion = v } }

// WithMaxBodyBytes limits request bodies; larger ones get 413.
func WithMaxBodyBytes(n int64) Option { return func(s *Handler) { s.maxBodyBytes = n } }

// New returns the OSB handler answering the catalog from cat and every
// other endpoint through backend. auth must not be nil: OSB requires
// platforms to authenticate.
func New(cat Catalog, backend Backend, auth *BasicAuth, opts ...Option) (*Handler, error) {
	if cat == nil || backend == nil || auth == nil {
		return nil, errors.New("osb: a catalog, a backend and credentials are required")
	}
	s := &Handler{
		catalog:      cat,
		backend:      backend,
		auth:         auth,
		log:          logr.Discard(),
		minVersion:   DefaultMinAPIVersion,
		maxBodyBytes: DefaultMaxBodyBytes,
	}
	for _, o := range opts {
		o(s)
	}
	s.mux = http.NewServeMux()
	for _, rt := range routes {
		s.mux.Handle(rt.pattern, s.wrap(rt.endpoint, rt.serve))
	}
	s.unclean = s.wrap("unknown", (*Handler).unknown)
	return s, nil
}

// ServeHTTP implements http.Handler. A path that is not canonical (double
// or trailing slashes, dot segments, also when percent-encoded in an id) is
// no endpoint: after authentication it gets 404, or 400 for an id that is
// a dot segment (see unknown), instead of the mux's redirect.
func (s *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p == "" || path.Clean(p) != p {
		s.unclean.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// exchange is one request in flight: the response writer, what the checks
// before the endpoint parsed, and the status written.
type exchange struct {
	http.ResponseWriter
	status int
	call   Call
}

// WriteHeader implements http.ResponseWriter.
func (x *exchange) WriteHeader(code int) {
	if x.status == 0 {
		x.status = code
	}
	x.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (x *exchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.ResponseWriter.Write(b)
}

// endpointFunc answers one OSB endpoint: a status and a body to encode as
// JSON, or an error (an *Error, or a storage error of the backend).
type endpointFunc func(s *Handler, x *exchange, r *http.Request) (int, any, error)

// RawJSON is a response body that is already encoded.
type RawJSON []byte

// wrap returns the handler of an endpoint with the shared checks, panic
// recovery and metrics.
func (s *Handler) wrap(endpoint string, fn endpointFunc) http.Handler {
	metrics := s.metrics.endpoint(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		x := &exchange{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(p)
				}
				s.log.Error(fmt.Errorf("panic: %v", p), "Request handler panicked", "endpoint", endpoint, "requestIdentity", x.call.RequestID, "stack", string(debug.Stack()))
				if x.status == 0 {
					s.write(x, 0, nil, ErrInternal)
				}
			}
			metrics.observe(x.status, time.Since(start))
		}()
		if id := r.Header.Get(HeaderRequestIdentity); id != "" {
			x.call.RequestID = id
			w.Header().Set(HeaderRequestIdentity, id)
		}
		if err := s.precheck(x, r); err != nil {
			var e *Error
			if endpoint == "catalog" && errors.As(err, &e) {
				refused := *e
				refused.refusedCatalog = true
				err = &refused
			}
			s.write(x, 0, nil, err)
			return
		}
		status, body, err := fn(s, x, r)
		s.write(x, status, body, err)
	})
}

// precheck runs the checks shared by every endpoint.
func (s *Handler) precheck(x *exchange, r *http.Request) error {
	if !s.auth.allows(r) {
		x.Header().Set("WWW-Authenticate", `Basic realm="marketplane-broker", charset="UTF-8"`)
		return NewError(http.StatusUnauthorized, "", "Authentication required: send the broker's credentials with HTTP basic authentication.")
	}
	v, err := s.checkVersion(r.Header.Get(HeaderAPIVersion))
	if err != nil {
		return err
	}
	x.call.Version = v
	if h := r.Header.Get(HeaderOriginatingIdentity); h != "" {
		id, err := parseOriginatingIdentity(h)
		if err != nil {
			return BadRequest("%s is malformed: %v.", HeaderOriginatingIdentity, err)
		}
		x.call.Identity = id
	}
	if r.ContentLength > s.maxBodyBytes {
		return tooLarge(s.maxBodyBytes)
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(x, r.Body, s.maxBodyBytes)
	}
	return nil
}

// checkVersion parses an X-Broker-API-Version and checks it against the
// minimum: a missing header, another major or an older minor is 412 with
// the version to send instead (docs/broker.md "How the broker reads the
// spec"). The description says what to do: a platform shows it to its
// operator.
func (s *Handler) checkVersion(h string) (APIVersion, error) {
	if h == "" {
		return APIVersion{}, NewError(http.StatusPreconditionFailed, "", "The %s header is required: send %s (or any %d.x from %s on) on every request.",
			HeaderAPIVersion, implementedVersion, s.minVersion.Major, s.minVersion)
	}
	v, err := ParseAPIVersion(h)
	if err != nil || v.Major != s.minVersion.Major || v.Less(s.minVersion) {
		return APIVersion{}, NewError(http.StatusPreconditionFailed, "", "%s %q is not supported by this broker: send %s (or any %d.x from %s on). It implements OSB %s; configure the platform or client to send that version.",
			HeaderAPIVersion, Truncate(h, 20), implementedVersion, s.minVersion.Major, s.minVersion, implementedVersion)
	}
	return v, nil
}

func tooLarge(limit int64) *Error {
	return NewError(http.StatusRequestEntityTooLarge, "", "The request body is larger than the broker accepts (%d bytes).", limit)
}

// write sends the response: err as an OSB error body, or body as JSON.
func (s *Handler) write(x *exchange, status int, body any, err error) {
	if err != nil {
		e, logDetail := storeError(err)
		switch {
		case logDetail:
			s.log.Error(err, "Request failed", "status", e.Status, "requestIdentity", x.call.RequestID)
		case e.Status >= 500:
			s.log.Info("Request answered with an error", "status", e.Status, "description", e.Description, "requestIdentity", x.call.RequestID)
		}
		status = e.Status
		eb := errorBody{Error: e.Code, Description: e.Description, InstanceUsable: e.InstanceUsable, UpdateRepeatable: e.UpdateRepeatable}
		if e.refusedCatalog {
			eb.Services = "none: " + e.Description
		}
		body = eb
		if e.RetryAfter > 0 {
			// RFC 9110 delay-seconds: a whole number, rounded up so
			// that a platform never comes back too early.
			x.Header().Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
		}
	}
	h := x.Header()
	if status == http.StatusNotModified {
		x.WriteHeader(status)
		return
	}
	var data []byte
	switch b := body.(type) {
	case RawJSON:
		data = b
	case nil:
		data = []byte("{}")
	default:
		var merr error
		if data, merr = json.Marshal(b); merr != nil {
			s.log.Error(merr, "Cannot encode a response", "requestIdentity", x.call.RequestID)
			status, data = http.StatusInternalServerError, []byte(`{"description":"The broker failed to encode its response."}`)
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	x.WriteHeader(status)
	_, _ = x.Write(data)
}

// getCatalog answers GET /v2/catalog from the prebuilt snapshot, with an
// ETag and If-None-Match support.
func (s *Handler) getCatalog(x *exchange, r *http.Request) (int, any, error) {
	snap := s.catalog.Snapshot()
	x.Header().Set("ETag", snap.ETag)
	if m := r.Header.Get("If-None-Match"); m != "" && etagMatches(m, snap.ETag) {
		return http.StatusNotModified, nil, nil
	}
	return http.StatusOK, RawJSON(snap.JSON), nil
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || t == etag || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// unknown answers paths and methods the OSB API does not define: 400 for
// an id that is a dot segment ("." or "..", also percent-encoded) or holds
// one between percent-encoded slashes ("..%2Fother") in the path of an
// endpoint that takes the method, 405 with an Allow header
// (RFC 9110) when the path is an endpoint that does not take the method,
// 404 otherwise.
func (s *Handler) unknown(x *exchange, r *http.Request) (int, any, error) {
	u := r.URL
	if probe, field := dotSegmentID(r.URL); field != "" {
		if slices.Contains(s.allowedMethods(probe, r.Host), r.Method) {
			return 0, nil, BadRequest("%s must not be %q or %q, nor hold such a segment or an empty one between slashes: URL normalisation rewrites such a path, so it cannot address the id; use the unreserved characters OSB recommends.", field, ".", "..")
		}
		u = probe
	}
	if allowed := s.allowedMethods(u, r.Host); len(allowed) > 0 && !slices.Contains(allowed, r.Method) {
		x.Header().Set("Allow", strings.Join(allowed, ", "))
		return 0, nil, NewError(http.StatusMethodNotAllowed, "", "%s is not allowed here; allowed: %s.", r.Method, strings.Join(allowed, ", "))
	}
	return 0, nil, NotFound("%s %s is not an endpoint of the Open Service Broker API.", r.Method, r.URL.Path)
}

// allowedMethods returns the methods the endpoint at u answers, none when
// u is no endpoint. A path that is not canonical is none: the mux would
// answer it with a redirect to another path, whose methods are not the
// ones of u.
func (s *Handler) allowedMethods(u *url.URL, host string) []string {
	if p := u.Path; p == "" || path.Clean(p) != p {
		return nil
	}
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: u, Host: host, Header: http.Header{}}
		if _, p := s.mux.Handler(probe); p != "/" && p != "" {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

// dotSegmentID finds an instance or binding id that makes the decoded path
// of an instance or binding endpoint not canonical: a dot segment, or an
// id whose percent-encoded slashes enclose a dot segment or an empty one
// ("..%2Fother", "a%2F"). It returns the name of the first such id and the
// path with every such id replaced by a placeholder, to find the endpoint
// it addresses; field is empty when there is none.
func dotSegmentID(u *url.URL) (probe *url.URL, field string) {
	segs := strings.Split(u.EscapedPath(), "/")
	if len(segs) < 4 || segs[0] != "" || segs[1] != "v2" || segs[2] != "service_instances" {
		return nil, ""
	}
	replace := func(i int, name string) {
		if v, err := url.PathUnescape(segs[i]); err == nil && segs[i] != "" && !cleanSegments(v) {
			segs[i] = "id"
			if field == "" {
				field = name
			}
		}
	}
	replace(3, "instance_id")
	if len(segs) >= 6 && segs[4] == "service_bindings" {
		replace(5, "binding_id")
	}
	if field == "" {
		return nil, ""
	}
	probe, err := url.Parse(strings.Join(segs, "/"))
	if err != nil {
		return nil, ""
	}
	return probe, field
}

// cleanSegments reports whether id, put into a path, leaves it canonical:
// none of its slash-separated parts is empty, "." or "..".
func cleanSegments(id string) bool {
	for part := range strings.SplitSeq(id, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}
