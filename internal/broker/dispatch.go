package broker

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/go-logr/logr"

	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/code"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// Dispatch is the osb.Backend serving both backends: Service Fabrik
// instances (sf.Backend) and instances of code-based offerings
// (code.Offerings). A provision goes to the backend of its service_id, or
// to the code-based one when the instance is code-based (which answers 409
// to another service); every other request to the backend that holds the
// instance (a code-based instance is recorded by its namespace osb-<name>).
type Dispatch struct {
	cat osb.Catalog
	sf  *sf.Backend
	// code is nil when no code-based offerings are served.
	code *code.Offerings
}

var _ osb.Backend = &Dispatch{}

// NewDispatch returns the backend dispatching to sfBackend and, when not
// nil, codeBackend. cat is the catalog both answer from.
func NewDispatch(cat osb.Catalog, sfBackend *sf.Backend, codeBackend *code.Offerings) (*Dispatch, error) {
	if cat == nil || sfBackend == nil {
		return nil, errors.New("broker: a catalog and the Service Fabrik backend are required")
	}
	return &Dispatch{cat: cat, sf: sfBackend, code: codeBackend}, nil
}

// NewHandler returns the broker's HTTP handler: the OSB API (osb.New) over
// the Service Fabrik backend and, when codeBackend is not nil, code-based
// offerings. cat must then be a MergedCatalog for them to be listed.
func NewHandler(cat osb.Catalog, sfBackend *sf.Backend, codeBackend *code.Offerings, auth *osb.BasicAuth, opts ...osb.Option) (*osb.Handler, error) {
	d, err := NewDispatch(cat, sfBackend, codeBackend)
	if err != nil {
		return nil, err
	}
	return osb.New(cat, d, auth, opts...)
}

// backend returns the backend that holds instance id.
func (d *Dispatch) backend(ctx context.Context, id string) (osb.Backend, error) {
	if d.code == nil {
		return d.sf, nil
	}
	isCode, err := d.code.Owns(ctx, id)
	switch {
	case err != nil:
		return nil, err
	case isCode:
		return d.code, nil
	}
	return d.sf, nil
}

// Provision implements osb.Backend: by service_id, or by instance.
func (d *Dispatch) Provision(ctx context.Context, c *osb.Call, req *osb.ProvisionRequest) (int, any, error) {
	if d.code != nil {
		if d.code.Serves(req.ServiceID) {
			return d.code.Provision(ctx, c, req)
		}
		// A code-based offering out of the catalog while its provider
		// is not Ready: 503, to be tried again, not the SF backend's 400.
		if req.ServiceID != "" && d.cat.Snapshot().Service(req.ServiceID) == nil {
			if err := d.code.Unserved(ctx, req.ServiceID, nil); err != nil {
				return 0, nil, err
			}
		}
	}
	b, err := d.backend(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return b.Provision(ctx, c, req)
}

// Update implements osb.Backend.
func (d *Dispatch) Update(ctx context.Context, c *osb.Call, req *osb.UpdateRequest) (int, any, error) {
	b, err := d.backend(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return b.Update(ctx, c, req)
}

// FetchInstance implements osb.Backend.
func (d *Dispatch) FetchInstance(ctx context.Context, c *osb.Call, req *osb.FetchRequest) (int, any, error) {
	b, err := d.backend(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return b.FetchInstance(ctx, c, req)
}

// Deprovision implements osb.Backend.
func (d *Dispatch) Deprovision(ctx context.Context, c *osb.Call, req *osb.DeleteRequest) (int, any, error) {
	b, err := d.backend(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return b.Deprovision(ctx, c, req)
}

// InstanceLastOperation implements osb.Backend: a poll of a code-based
// operation goes to that backend (the instance may be gone already), any
// other by instance. SF operations are "<verb>-<n>", code-based ones a bare
// verb.
func (d *Dispatch) InstanceLastOperation(ctx context.Context, c *osb.Call, req *osb.LastOperationRequest) (int, any, error) {
	if d.code != nil && code.IsOperation(req.Operation) {
		return d.code.InstanceLastOperation(ctx, c, req)
	}
	b, err := d.backend(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return b.InstanceLastOperation(ctx, c, req)
}

// Bind implements osb.Backend.
func (d *Dispatch) Bind(ctx context.Context, c *osb.Call, req *osb.BindRequest) (int, any, error) {
	b, err := d.backend(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return b.Bind(ctx, c, req)
}

// FetchBinding implements osb.Backend.
func (d *Dispatch) FetchBinding(ctx context.Context, c *osb.Call, req *osb.FetchRequest) (int, any, error) {
	b, err := d.backend(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return b.FetchBinding(ctx, c, req)
}

// Unbind implements osb.Backend.
func (d *Dispatch) Unbind(ctx context.Context, c *osb.Call, req *osb.DeleteRequest) (int, any, error) {
	b, err := d.backend(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return b.Unbind(ctx, c, req)
}

// BindingLastOperation implements osb.Backend.
func (d *Dispatch) BindingLastOperation(ctx context.Context, c *osb.Call, req *osb.LastOperationRequest) (int, any, error) {
	b, err := d.backend(ctx, req.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return b.BindingLastOperation(ctx, c, req)
}

// MergedCatalog is the catalog of SFServices (SF) with the code-based
// offerings (Code) appended (catalog.Merge). It merges again only when
// either part changed, and logs the offerings it leaves out.
type MergedCatalog struct {
	sf   osb.Catalog
	code func() *catalog.CodeSnapshot
	log  logr.Logger
	last atomic.Pointer[mergedEntry]
}

type mergedEntry struct {
	sf   *catalog.Snapshot
	code *catalog.CodeSnapshot
	snap *catalog.Snapshot
}

var _ osb.Catalog = &MergedCatalog{}

// NewMergedCatalog returns the merged catalog of sfCatalog and codeCatalog.
func NewMergedCatalog(sfCatalog osb.Catalog, codeCatalog func() *catalog.CodeSnapshot, log logr.Logger) *MergedCatalog {
	return &MergedCatalog{sf: sfCatalog, code: codeCatalog, log: log}
}

// Snapshot implements osb.Catalog.
func (m *MergedCatalog) Snapshot() *catalog.Snapshot {
	sfSnap, codeSnap := m.sf.Snapshot(), m.code()
	if e := m.last.Load(); e != nil && e.sf == sfSnap && e.code == codeSnap {
		return e.snap
	}
	snap := catalog.Merge(sfSnap, codeSnap)
	if prev := m.last.Swap(&mergedEntry{sf: sfSnap, code: codeSnap, snap: snap}); prev == nil || prev.snap.ETag != snap.ETag {
		m.log.Info("Catalog with code-based offerings changed", "etag", snap.ETag)
		for _, p := range snap.Problems {
			m.log.Info("Catalog entry left out", "problem", p)
		}
	}
	return snap
}
