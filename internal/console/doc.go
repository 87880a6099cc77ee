// Package console is Marketplane's web console: server-rendered pages
// (html/template, a little vanilla JavaScript, everything embedded) where a
// tenant browses the Offerings of the onboarding cluster, orders instances
// through forms generated from the offerings' JSON schemas, follows them
// and binds them, and where a platform operator sees providers, SFClusters
// and provisioning latency.
//
// The console has no identity of its own. A user signs in by pasting a
// bearer token (or a kubeconfig that carries one); the token lives only in
// an in-memory session keyed by a random cookie, and every Kubernetes
// request for that user is made with a rest.Config that carries that token
// and nothing else, so the API server's authentication and RBAC decide
// what each user sees and does. State-changing requests need the session's
// CSRF token and are refused cross-origin. docs/console.md describes the
// pages and the security model.
package console
