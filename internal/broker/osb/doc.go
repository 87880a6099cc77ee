// Package osb serves the Open Service Broker API v2.17 over net/http. Its
// one route table (routes) puts every request through the same checks
// (request identity, basic auth 401, X-Broker-API-Version 412, originating
// identity 400, body size 413) with panic recovery and metrics, parses the
// ids and the query, decodes the body once into a typed request and hands
// it with its Call to a Backend. It answers GET /v2/catalog from a Catalog
// snapshot itself, writes OSB error bodies (Error), keeps no state and
// knows no backend.
package osb
