package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path"
	"sync/atomic"

	"github.com/go-logr/logr"

	"github.com/marketplane/marketplane/internal/broker/catalog"
)

// Router serves one OSB API for both backends: Service Fabrik instances
// (Server) and instances of code-based offerings (CodeOfferings). Every
// request passes the Server's shared checks first (authentication, API
// version, originating identity, body size); then a provision goes to the
// backend of its service_id, and every other request on an instance to
// the backend that holds the instance (a code-based instance is recorded
// by its namespace osb-<name>). The catalog is the Server's, which must be
// a MergedCatalog for code-based offerings to be listed.
type Router struct {
	sf   *Server
	code *CodeOfferings
	mux  *http.ServeMux
}

var _ http.Handler = &Router{}

// NewRouter returns the handler serving sf and code.
func NewRouter(sf *Server, code *CodeOfferings) (*Router, error) {
	if sf == nil || code == nil {
		return nil, errors.New("broker router: both backends are required")
	}
	rt := &Router{sf: sf, code: code, mux: http.NewServeMux()}
	handle := func(pattern, endpoint string, fn endpointFunc) { rt.mux.Handle(pattern, sf.wrap(endpoint, fn)) }
	handle("GET /v2/catalog", "catalog", sf.getCatalog)
	handle("PUT /v2/service_instances/{instance_id}", "provision", rt.provision)
	handle("PATCH /v2/service_instances/{instance_id}", "update", rt.byInstance(sf.update, code.update))
	handle("GET /v2/service_instances/{instance_id}", "fetch_instance", rt.byInstance(sf.fetchInstance, code.fetchInstance))
	handle("DELETE /v2/service_instances/{instance_id}", "deprovision", rt.byInstance(sf.deprovision, code.deprovision))
	handle("GET /v2/service_instances/{instance_id}/last_operation", "instance_last_operation", rt.lastOperation)
	handle("PUT /v2/service_instances/{instance_id}/service_bindings/{binding_id}", "bind", rt.byInstance(sf.bind, code.bind))
	handle("GET /v2/service_instances/{instance_id}/service_bindings/{binding_id}", "fetch_binding", rt.byInstance(sf.fetchBinding, code.fetchBinding))
	handle("DELETE /v2/service_instances/{instance_id}/service_bindings/{binding_id}", "unbind", rt.byInstance(sf.unbind, code.unbind))
	handle("GET /v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation", "binding_last_operation",
		rt.byInstance(sf.bindingLastOperation, code.notSupported("asynchronous bindings")))
	handle("/", "unknown", sf.unknown)
	return rt, nil
}

// ServeHTTP implements http.Handler. Paths that are not canonical are the
// Server's to answer.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p == "" || path.Clean(p) != p {
		rt.sf.ServeHTTP(w, r)
		return
	}
	rt.mux.ServeHTTP(w, r)
}

// isCode reports whether the request's instance is code-based. An id the
// Server would refuse is left to it.
func (rt *Router) isCode(r *http.Request) (bool, error) {
	id := r.PathValue("instance_id")
	if id == "" || len(id) > maxIDLength || checkIDChars(id) != nil {
		return false, nil
	}
	return rt.code.owns(r.Context(), id)
}

// byInstance dispatches by the backend that holds the instance.
func (rt *Router) byInstance(sf, code endpointFunc) endpointFunc {
	return func(x *exchange, r *http.Request) (int, any, error) {
		isCode, err := rt.isCode(r)
		if err != nil {
			return 0, nil, err
		}
		if isCode {
			return code(x, r)
		}
		return sf(x, r)
	}
}

// provision dispatches by service_id, or to the code-based backend when
// the instance is code-based (which answers 409 to another service).
func (rt *Router) provision(x *exchange, r *http.Request) (int, any, error) {
	if r.Body != nil {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return 0, nil, tooLarge(mbe.Limit)
			}
			return 0, nil, badRequest("Cannot read the request body: %v.", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		var head struct {
			ServiceID string `json:"service_id"`
		}
		if json.Unmarshal(data, &head) == nil && rt.code.serves(head.ServiceID) {
			return rt.code.provision(x, r)
		}
		// A code-based offering out of the catalog while its provider
		// is not Ready: 503, to be tried again, not the SF backend's 400.
		if head.ServiceID != "" && rt.sf.catalog.Snapshot().Service(head.ServiceID) == nil {
			if err := rt.code.unserved(r.Context(), head.ServiceID, nil); err != nil {
				return 0, nil, err
			}
		}
	}
	return rt.byInstance(rt.sf.provision, rt.code.provision)(x, r)
}

// lastOperation dispatches by the operation polled when it names a
// code-based one (the instance may be gone already), else by instance.
func (rt *Router) lastOperation(x *exchange, r *http.Request) (int, any, error) {
	if q, err := parseQuery(r); err == nil {
		// SF operations are "<verb>-<n>": a bare verb is code-based.
		if op := q.operationV.value; op == operationProvision || op == operationDeprovision || op == operationUpdate {
			return rt.code.lastOperation(x, r)
		}
	}
	return rt.byInstance(rt.sf.instanceLastOperation, rt.code.lastOperation)(x, r)
}

// MergedCatalog is the catalog of SFServices (SF) with the code-based
// offerings (Code) appended (catalog.Merge). It merges again only when
// either part changed, and logs the offerings it leaves out.
type MergedCatalog struct {
	sf   Catalog
	code func() *catalog.CodeSnapshot
	log  logr.Logger
	last atomic.Pointer[mergedEntry]
}

type mergedEntry struct {
	sf   *catalog.Snapshot
	code *catalog.CodeSnapshot
	snap *catalog.Snapshot
}

var _ Catalog = &MergedCatalog{}

// NewMergedCatalog returns the merged catalog of sf and code.
func NewMergedCatalog(sf Catalog, code func() *catalog.CodeSnapshot, log logr.Logger) *MergedCatalog {
	return &MergedCatalog{sf: sf, code: code, log: log}
}

// Snapshot implements Catalog.
func (m *MergedCatalog) Snapshot() *catalog.Snapshot {
	sf, code := m.sf.Snapshot(), m.code()
	if e := m.last.Load(); e != nil && e.sf == sf && e.code == code {
		return e.snap
	}
	snap := catalog.Merge(sf, code)
	if prev := m.last.Swap(&mergedEntry{sf: sf, code: code, snap: snap}); prev == nil || prev.snap.ETag != snap.ETag {
		m.log.Info("Catalog with code-based offerings changed", "etag", snap.ETag)
		for _, p := range snap.Problems {
			m.log.Info("Catalog entry left out", "problem", p)
		}
	}
	return snap
}
