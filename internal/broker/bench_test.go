package broker

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/marketplane/marketplane/internal/broker/osb"
)

// BenchmarkHandlers measures the handler alone (no network) on the two hot
// read paths, to keep their per-request work and allocations visible.
// bench/broker measures them end to end against a bare handler.
func BenchmarkHandlers(b *testing.B) {
	s := newFuzzServer(b, newFakeStore(true))
	for _, bc := range []struct{ name, target string }{
		{"catalog", "/v2/catalog"},
		{"last_operation", "/v2/service_instances/inst-1/last_operation?operation=create-1&service_id=svc-sync&plan_id=plan-sync-small"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, bc.target, nil)
			req.SetBasicAuth(fuzzUser, fuzzPassword)
			req.Header.Set(osb.HeaderAPIVersion, "2.17")
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				s.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
