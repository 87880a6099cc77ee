// Package console is Marketplane's web console: server-rendered pages where
// a tenant browses Offerings, orders, follows and binds instances, and a
// platform operator sees providers and SFClusters. It has no identity of
// its own: every Kubernetes request carries the signed-in user's token, so
// the API server's authentication and RBAC decide what each user sees and
// does. docs/console.md describes the pages and the security model.
package console
