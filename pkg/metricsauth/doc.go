// Package metricsauth decides how a Marketplane process serves its metrics
// endpoint, so that the operator, every provider and the broker do it the
// same way: on loopback by default, and on any other address over HTTPS
// with a bearer token that the cluster's TokenReview and SubjectAccessReview
// accept for the /metrics URL. docs/security.md lists the RBAC this needs.
package metricsauth
