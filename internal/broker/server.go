package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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

// Defaults of the server options.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultSyncTimeout  = 50 * time.Second
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultRecheckInterval is how often a request waiting for the
	// provisioner re-reads the object when the Store notifies it of
	// changes: only a safety net for a lost notification.
	DefaultRecheckInterval = 2 * time.Second
)

// maxIDLength bounds instance and binding ids.
const maxIDLength = 1024

// Server is the OSB broker's HTTP handler.
type Server struct {
	catalog Catalog
	store   Store
	auth    *BasicAuth
	mux     *http.ServeMux
	// unclean answers paths that are not in canonical form, which the mux
	// would redirect without the checks every request passes.
	unclean http.Handler

	log          logr.Logger
	metrics      *Metrics
	minVersion   APIVersion
	maxBodyBytes int64
	syncTimeout  time.Duration
	pollInterval time.Duration
	// recheckInterval replaces pollInterval with a Store that notifies
	// of changes.
	recheckInterval time.Duration
}

var _ http.Handler = &Server{}

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger. Requests are logged with their request
// identity; bodies, credentials and parameters never are.
func WithLogger(l logr.Logger) Option { return func(s *Server) { s.log = l } }

// WithMetrics records request counts and latencies in m.
func WithMetrics(m *Metrics) Option { return func(s *Server) { s.metrics = m } }

// WithMinAPIVersion sets the oldest X-Broker-API-Version accepted
// (DefaultMinAPIVersion by default).
func WithMinAPIVersion(v APIVersion) Option { return func(s *Server) { s.minVersion = v } }

// WithMaxBodyBytes limits request bodies; larger ones get 413.
func WithMaxBodyBytes(n int64) Option { return func(s *Server) { s.maxBodyBytes = n } }

// WithSyncTimeout bounds how long a request for a synchronous plan waits for
// the provisioner before it answers 202 (when the platform accepts
// asynchronous operations) or 504.
func WithSyncTimeout(d time.Duration) Option { return func(s *Server) { s.syncTimeout = d } }

// WithPollInterval sets how often a waiting request looks at a store that
// does not notify of changes (see Notifier).
func WithPollInterval(d time.Duration) Option { return func(s *Server) { s.pollInterval = d } }

// WithRecheckInterval sets how often a waiting request re-reads the object
// although its store (a Notifier) reported no change: the safety net for a
// lost notification.
func WithRecheckInterval(d time.Duration) Option { return func(s *Server) { s.recheckInterval = d } }

// New returns the broker handler. auth must not be nil: OSB requires
// platforms to authenticate.
func New(cat Catalog, store Store, auth *BasicAuth, opts ...Option) (*Server, error) {
	if cat == nil || store == nil || auth == nil {
		return nil, errors.New("broker: a catalog, a store and credentials are required")
	}
	s := &Server{
		catalog:      cat,
		store:        store,
		auth:         auth,
		log:          logr.Discard(),
		minVersion:   DefaultMinAPIVersion,
		maxBodyBytes: DefaultMaxBodyBytes,
		syncTimeout:  DefaultSyncTimeout,
		pollInterval: DefaultPollInterval,

		recheckInterval: DefaultRecheckInterval,
	}
	for _, o := range opts {
		o(s)
	}
	s.mux = http.NewServeMux()
	s.handle("GET /v2/catalog", "catalog", s.getCatalog)
	s.handle("PUT /v2/service_instances/{instance_id}", "provision", s.provision)
	s.handle("PATCH /v2/service_instances/{instance_id}", "update", s.update)
	s.handle("GET /v2/service_instances/{instance_id}", "fetch_instance", s.fetchInstance)
	s.handle("DELETE /v2/service_instances/{instance_id}", "deprovision", s.deprovision)
	s.handle("GET /v2/service_instances/{instance_id}/last_operation", "instance_last_operation", s.instanceLastOperation)
	s.handle("PUT /v2/service_instances/{instance_id}/service_bindings/{binding_id}", "bind", s.bind)
	s.handle("GET /v2/service_instances/{instance_id}/service_bindings/{binding_id}", "fetch_binding", s.fetchBinding)
	s.handle("DELETE /v2/service_instances/{instance_id}/service_bindings/{binding_id}", "unbind", s.unbind)
	s.handle("GET /v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation", "binding_last_operation", s.bindingLastOperation)
	s.handle("/", "unknown", s.unknown)
	s.unclean = s.wrap("unknown", s.unknown)
	return s, nil
}

// ServeHTTP implements http.Handler. A path that is not canonical (double
// or trailing slashes, dot segments, also when percent-encoded in an id) is
// no endpoint: after authentication it gets 404, or 400 for an id that is
// a dot segment (see unknown), instead of the mux's redirect.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	status    int
	identity  *originatingIdentity
	requestID string
	// version is the request's X-Broker-API-Version: the broker answers
	// as that version defines (see asyncBindings).
	version APIVersion
}

// asyncBindings reports whether the caller's version knows asynchronous
// bindings (accepts_incomplete on bind and unbind): 2.14 added them. A
// caller of an older version that sends accepts_incomplete=true anyway
// (Service Manager does) is taken at its word.
func (x *exchange) asyncBindings() bool { return !x.version.Less(Version2_14) }

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
// JSON, or an error (an *Error, or a Store error).
type endpointFunc func(x *exchange, r *http.Request) (int, any, error)

// rawJSON is a body that is already encoded.
type rawJSON []byte

// handle registers an endpoint behind the checks every request passes, in
// this order: request identity echoed; basic auth (401); API version (412);
// originating identity (400); body size (413).
func (s *Server) handle(pattern, endpoint string, fn endpointFunc) {
	s.mux.Handle(pattern, s.wrap(endpoint, fn))
}

// wrap returns the handler of an endpoint with the shared checks, panic
// recovery and metrics.
func (s *Server) wrap(endpoint string, fn endpointFunc) http.Handler {
	metrics := s.metrics.endpoint(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		x := &exchange{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(p)
				}
				s.log.Error(fmt.Errorf("panic: %v", p), "Request handler panicked", "endpoint", endpoint, "requestIdentity", x.requestID, "stack", string(debug.Stack()))
				if x.status == 0 {
					s.write(x, 0, nil, errInternal)
				}
			}
			metrics.observe(x.status, time.Since(start))
		}()
		if id := r.Header.Get(HeaderRequestIdentity); id != "" {
			x.requestID = id
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
		status, body, err := fn(x, r)
		s.write(x, status, body, err)
	})
}

// precheck runs the checks shared by every endpoint.
func (s *Server) precheck(x *exchange, r *http.Request) error {
	if !s.auth.allows(r) {
		x.Header().Set("WWW-Authenticate", `Basic realm="marketplane-broker", charset="UTF-8"`)
		return newError(http.StatusUnauthorized, "", "Authentication required: send the broker's credentials with HTTP basic authentication.")
	}
	v, err := s.checkVersion(r.Header.Get(HeaderAPIVersion))
	if err != nil {
		return err
	}
	x.version = v
	if h := r.Header.Get(HeaderOriginatingIdentity); h != "" {
		id, err := parseOriginatingIdentity(h)
		if err != nil {
			return badRequest("%s is malformed: %v.", HeaderOriginatingIdentity, err)
		}
		x.identity = id
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
func (s *Server) checkVersion(h string) (APIVersion, error) {
	if h == "" {
		return APIVersion{}, newError(http.StatusPreconditionFailed, "", "The %s header is required: send %s (or any %d.x from %s on) on every request.",
			HeaderAPIVersion, implementedVersion, s.minVersion.Major, s.minVersion)
	}
	v, err := ParseAPIVersion(h)
	if err != nil || v.Major != s.minVersion.Major || v.Less(s.minVersion) {
		return APIVersion{}, newError(http.StatusPreconditionFailed, "", "%s %q is not supported by this broker: send %s (or any %d.x from %s on). It implements OSB %s; configure the platform or client to send that version.",
			HeaderAPIVersion, truncate(h, 20), implementedVersion, s.minVersion.Major, s.minVersion, implementedVersion)
	}
	return v, nil
}

func tooLarge(limit int64) *Error {
	return newError(http.StatusRequestEntityTooLarge, "", "The request body is larger than the broker accepts (%d bytes).", limit)
}

// write sends the response: err as an OSB error body, or body as JSON.
func (s *Server) write(x *exchange, status int, body any, err error) {
	if err != nil {
		e, logDetail := storeError(err)
		switch {
		case logDetail:
			s.log.Error(err, "Request failed", "status", e.Status, "requestIdentity", x.requestID)
		case e.Status >= 500:
			s.log.Info("Request answered with an error", "status", e.Status, "description", e.Description, "requestIdentity", x.requestID)
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
	case rawJSON:
		data = b
	case nil:
		data = []byte("{}")
	default:
		var merr error
		if data, merr = json.Marshal(b); merr != nil {
			s.log.Error(merr, "Cannot encode a response", "requestIdentity", x.requestID)
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
func (s *Server) getCatalog(x *exchange, r *http.Request) (int, any, error) {
	snap := s.catalog.Snapshot()
	x.Header().Set("ETag", snap.ETag)
	if m := r.Header.Get("If-None-Match"); m != "" && etagMatches(m, snap.ETag) {
		return http.StatusNotModified, nil, nil
	}
	return http.StatusOK, rawJSON(snap.JSON), nil
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
func (s *Server) unknown(x *exchange, r *http.Request) (int, any, error) {
	u := r.URL
	if probe, field := dotSegmentID(r.URL); field != "" {
		if slices.Contains(s.allowedMethods(probe, r.Host), r.Method) {
			return 0, nil, badRequest("%s must not be %q or %q, nor hold such a segment or an empty one between slashes: URL normalisation rewrites such a path, so it cannot address the id; use the unreserved characters OSB recommends.", field, ".", "..")
		}
		u = probe
	}
	if allowed := s.allowedMethods(u, r.Host); len(allowed) > 0 && !slices.Contains(allowed, r.Method) {
		x.Header().Set("Allow", strings.Join(allowed, ", "))
		return 0, nil, newError(http.StatusMethodNotAllowed, "", "%s is not allowed here; allowed: %s.", r.Method, strings.Join(allowed, ", "))
	}
	return 0, nil, notFound("%s %s is not an endpoint of the Open Service Broker API.", r.Method, r.URL.Path)
}

// allowedMethods returns the methods the endpoint at u answers, none when
// u is no endpoint. A path that is not canonical is none: the mux would
// answer it with a redirect to another path, whose methods are not the
// ones of u.
func (s *Server) allowedMethods(u *url.URL, host string) []string {
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

// queryValue is one query parameter: its first value and whether it was
// sent at all.
type queryValue struct {
	value   string
	present bool
}

// request holds the query parameters of a request that OSB defines.
type request struct {
	acceptsIncompleteV, serviceID, planID, operationV queryValue
}

// parseQuery reads the OSB query parameters (the first value of each) and
// checks that the whole query string is well-formed, as url.ParseQuery
// would: a malformed one is a 400. It allocates only for escaped values.
func parseQuery(r *http.Request) (request, error) {
	var q request
	raw := r.URL.RawQuery
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if strings.Contains(pair, ";") {
			return request{}, badRequest("The query string is malformed: a semicolon is not a separator.")
		}
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return request{}, badRequest("The query string is malformed: %v.", err)
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return request{}, badRequest("The query string is malformed: %v.", err)
		}
		var dst *queryValue
		switch key {
		case "accepts_incomplete":
			dst = &q.acceptsIncompleteV
		case "service_id":
			dst = &q.serviceID
		case "plan_id":
			dst = &q.planID
		case "operation":
			dst = &q.operationV
		default:
			continue
		}
		if !dst.present {
			*dst = queryValue{value: value, present: true}
		}
	}
	return q, nil
}

func (q *request) get(name string) queryValue {
	switch name {
	case "service_id":
		return q.serviceID
	case "plan_id":
		return q.planID
	case "operation":
		return q.operationV
	case "accepts_incomplete":
		return q.acceptsIncompleteV
	}
	return queryValue{}
}

// acceptsIncomplete reads accepts_incomplete (absent or empty: false).
func (q request) acceptsIncomplete() (bool, error) {
	v := q.acceptsIncompleteV
	if !v.present || v.value == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v.value)
	if err != nil {
		return false, badRequest("accepts_incomplete must be true or false, not %q.", truncate(v.value, 100))
	}
	return b, nil
}

// hint checks an optional query value that, when present, must not be
// empty (service_id, plan_id). The broker does not use the value: the
// instance or binding already names its service and plan.
func (q request) hint(name string) error {
	if v := q.get(name); v.present && v.value == "" {
		return badRequest("%s must not be empty when present.", name)
	}
	return nil
}

// required returns a mandatory query value.
func (q request) required(name string) (string, error) {
	v := q.get(name)
	if v.value == "" {
		return "", badRequest("The query parameter %s is required.", name)
	}
	return v.value, nil
}

// operation returns the operation query parameter, nil when absent.
func (q request) operation() (*Operation, error) {
	v := q.operationV
	if !v.present {
		return nil, nil
	}
	if v.value == "" {
		return nil, badRequest("operation must not be empty when present.")
	}
	op, err := ParseOperation(v.value)
	if err != nil {
		return nil, badRequest("operation %q: %v.", truncate(v.value, 100), err)
	}
	return &op, nil
}

// pathID reads and checks an id from the path. OSB puts no limit on the
// characters of an id (it recommends RFC 3986 unreserved ones), but an id
// is stored in the spec of an object, in a namespace annotation and in
// logs: NUL and other control characters, which would truncate or forge log
// lines and which the API server's JSON would carry as escapes, and bytes
// that are not UTF-8, which JSON cannot hold unchanged (two ids would then
// be stored alike), are refused with 400.
func pathID(r *http.Request, name string) (string, error) {
	id := r.PathValue(name)
	switch {
	case id == "":
		return "", badRequest("%s must not be empty.", name)
	case len(id) > maxIDLength:
		return "", badRequest("%s is longer than %d bytes.", name, maxIDLength)
	}
	if err := checkIDChars(id); err != nil {
		return "", badRequest("%s %s.", name, err)
	}
	return id, nil
}

// invalidAt reports whether the RuneError decoded at byte i of s is a byte
// that is not UTF-8 rather than a literal U+FFFD.
func invalidAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 1
}

// checkIDChars reports why id cannot be an instance or binding id: it
// holds a control character (C0, DEL or C1, NUL included), a Unicode format
// character (invisible, e.g. a bidirectional override that makes an id look
// like another in logs), or bytes that are not UTF-8. It is cheap for the
// common case, an ASCII GUID, since it runs on every request.
func checkIDChars(id string) error {
	for i, c := range id {
		switch {
		case c < 0x80 && c >= 0x20 && c != 0x7f:
			continue
		case c == utf8.RuneError && invalidAt(id, i):
			return fmt.Errorf("is not valid UTF-8 (at byte %d)", i)
		case unicode.IsControl(c):
			return fmt.Errorf("must not contain control characters (U+%04X at byte %d); use the unreserved characters OSB recommends", c, i)
		case unicode.Is(unicode.Cf, c):
			return fmt.Errorf("must not contain invisible format characters (U+%04X at byte %d); use the unreserved characters OSB recommends", c, i)
		}
	}
	return nil
}

// decodeBody reads a JSON object body into v.
func decodeBody(r *http.Request, v any) error {
	if r.Body == nil {
		return badRequest("The request body is missing; want a JSON object.")
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(mbe.Limit)
		}
		return badRequest("Cannot read the request body: %v.", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return badRequest("The request body is empty; want a JSON object.")
	}
	if data[0] != '{' {
		return badRequest("The request body must be a JSON object.")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest("The request body is invalid: %s must not be a JSON %s.", fieldName(te), te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return badRequest("The request body is not valid JSON (at byte %d).", se.Offset)
		}
		return badRequest("The request body is invalid.")
	}
	return nil
}

func fieldName(te *json.UnmarshalTypeError) string {
	if te.Field != "" {
		return te.Field
	}
	return "a field"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// checkPlatform enforces that the originating identity's platform equals
// context.platform when both are sent (OSB "Originating Identity").
func checkPlatform(id *originatingIdentity, ctx json.RawMessage) error {
	if id == nil {
		return nil
	}
	if p := contextPlatform(ctx); p != "" && p != id.platform {
		return badRequest("The platform of %s (%q) differs from context.platform (%q).", HeaderOriginatingIdentity, id.platform, p)
	}
	return nil
}
