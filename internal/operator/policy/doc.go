// Package policy is the access policy the provider operator enforces on
// providers (docs/security.md): which API groups and service kinds each
// provider owns (groups.go), and which clusters and rules its
// AccessRequests and ClusterRequests may ask for.
//
// The platform operator widens the defaults per provider in
// spec.accessPolicy; a provider cannot change them, since it may write only
// its status.
package policy
