// Package testapi is a tiny service provider API used only by the tests of
// package spruntime: a namespaced TestService (the ServiceProviderAPI, on
// the onboarding cluster) and a cluster-scoped ProviderConfig (on the
// platform cluster). Its CRDs are generated into crds/ and kept out of
// api/crds so that they are never installed outside tests.
//
// +kubebuilder:object:generate=true
// +groupName=test.services.openmcp.cloud
// +versionName=v1alpha1
package testapi
