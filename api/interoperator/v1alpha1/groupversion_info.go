/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "interoperator.services.openmcp.cloud", Version: "v1alpha1"}

	// SchemeBuilder collects the kinds of this package so that AddToScheme can
	// register them with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme registers every kind of this package with a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
