// Package stack adds Marketplane's own services to a local landscape: the
// sample provider and the inter-operator as ServiceProviders (so they start
// through the real init/run contract), the sample catalog, and the OSB
// broker. The landscape package runs the control plane and the operator;
// this package is what runs on top, including a user's own manifests
// (AddManifests: their providers, with images mapped by --image-map).
//
// Every wait names what it waits for and, when it ends without it, what it
// saw last (conditions, the tail of the process's log); a provider whose
// init failed or whose run process exited fails the wait at once.
package stack
