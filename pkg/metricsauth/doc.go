// Package metricsauth decides how a Marketplane process serves its metrics
// endpoint, so that the operator, every provider and the broker do it the
// same way.
//
// Metrics listen on loopback by default: only processes on the same host
// reach them, as a sidecar or `kubectl port-forward` would. An address that
// is not loopback (":8080", "0.0.0.0:8080", a pod IP) is reachable by
// anyone on the network, so there, unless turned off with
// --metrics-secure=false, metrics are served over HTTPS and every request
// must carry a bearer token that the cluster's TokenReview accepts and
// whose user a SubjectAccessReview allows to "get" the non-resource URL of
// the request (/metrics): controller-runtime's
// filters.WithAuthenticationAndAuthorization. The serving process then
// needs "create" on tokenreviews (authentication.k8s.io) and
// subjectaccessreviews (authorization.k8s.io) in that cluster, and a
// scraper a ClusterRole with nonResourceURLs ["/metrics"], verbs ["get"].
package metricsauth
