// Package providerrequests finds the Denied AccessRequests and
// ClusterRequests of a provider, as the provider operator reports them in
// its RequestsGranted condition and the validation flow in its failures,
// and derives the namespace the operator creates for a provider, where
// most of those requests live.
package providerrequests
