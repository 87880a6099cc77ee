// Package stack adds Marketplane's own services to a local landscape: the
// sample provider and the inter-operator as ServiceProviders (so they start
// through the real init/run contract), the sample catalog, and the OSB
// broker. The landscape package runs the control plane and the operator;
// this package is what runs on top.
package stack
