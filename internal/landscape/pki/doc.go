// Package pki creates the certificates and keys of the local landscape: a
// certificate authority for the API servers' serving certificates (one CA
// bundle that every kubeconfig of the landscape trusts), one for etcd (its
// serving certificate and the client certificate of the API servers), and,
// per cluster, a client CA with an admin and a controller-manager client
// certificate and the service-account signing key.
//
// Keys are ECDSA P-256, written as PEM files readable by the owner only.
// Every file is created once and reused when it exists, so that a landscape
// started again keeps the identities that its etcd data refers to
// (service-account tokens stay valid, kubeconfigs keep working).
package pki
