// Package access implements the AccessRequest controller of the provider
// operator: it turns an AccessRequest on the platform cluster into
// credentials for the requested cluster, scoped to the requested rules.
//
// For a token request the controller resolves the target Cluster (directly,
// or through the granted ClusterRequest), connects with the Cluster's admin
// kubeconfig (clusters.AdminConfig) and creates there, in the namespace
// AccessNamespace, a ServiceAccount "ar-<hash of the request UID>", one
// Role or ClusterRole per entry of spec.token.permissions with a binding to
// it, and a binding per entry of spec.token.roleRefs. It mints a token with
// the TokenRequest API for spec.ttl (default 24 h) and writes the Secret
// "<request name>.kubeconfig" in the request's namespace with the keys
// kubeconfig, token, host, ca.crt, expirationTimestamp and creationTimestamp
// (Unix seconds), named in status.secretRef. The token is replaced when 80 %
// of its lifetime has passed.
//
// Everything created on the target carries the label RequestUIDLabel, by
// which it is found again: stale roles and bindings are removed when the
// spec changes, and deleting the AccessRequest deletes the ServiceAccount
// (which invalidates its tokens), the roles and bindings and the Secret
// before the finalizer goes. Namespaces the controller created are left in
// place.
//
// Requests in a provider namespace are checked against the access policy
// (package policy) before anything is read through their reference or
// created on their cluster: which clusters a provider may reach, which
// rules and roles it may ask for there, and in whose namespaces
// (namespaces.go). A request outside the policy is Denied with reason
// PolicyViolation, and what an earlier grant created is revoked. A
// provider's ServiceAccount is named "ar-<hash>.<provider ID>", and before
// the controller grants a provider anything on a cluster it installs there
// the admission policies that keep providers apart where RBAC cannot
// (admission.go) and waits until the API server enforces them.
//
// OIDC access is not supported on the clusters Marketplane provides and is
// reported as Ready=False with reason OIDCNotSupported.
package access
