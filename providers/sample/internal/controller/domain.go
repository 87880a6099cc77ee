package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/marketplane/marketplane/pkg/spruntime"

	apiv1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
)

// The DomainServiceAPI this provider installs into MCP clusters: the API
// the tenant uses.
const (
	// DomainGroup is the API group of the DomainServiceAPI.
	DomainGroup = "domain.sample.services.openmcp.cloud"
	// DomainVersion is its version.
	DomainVersion = "v1alpha1"
	// DomainKind is its kind.
	DomainKind = "SampleObject"
	// DomainPlural is its resource name.
	DomainPlural = "sampleobjects"
	// DomainCRDName is the name of its CRD.
	DomainCRDName = DomainPlural + "." + DomainGroup
)

// Labels and annotations on what the provider creates.
const (
	// ManagedByLabel names the provider that manages an object.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// VersionAnnotation records the version of the domain service (the
	// Sample's spec.version, or the ProviderConfig's default).
	VersionAnnotation = "sample.services.openmcp.cloud/version"
	// OwnerAnnotation records the Sample ("namespace/name") a workload
	// namespace belongs to.
	OwnerAnnotation = "sample.services.openmcp.cloud/owner"
)

// DomainGroupVersion is the group and version of the DomainServiceAPI.
var DomainGroupVersion = schema.GroupVersion{Group: DomainGroup, Version: DomainVersion}

// Condition reasons of the Sample reconciler, next to the runtime's
// (spruntime.Reason*).
const (
	// ReasonInstalling: the DomainServiceAPI is being installed.
	ReasonInstalling = "Installing"
	// ReasonWaitingForCRD: the CRD is installed but not yet served.
	ReasonWaitingForCRD = "WaitingForCRD"
	// ReasonUnsupportedVersion: spec.version is not one the
	// ProviderConfig offers (invalid user input).
	ReasonUnsupportedVersion = "UnsupportedVersion"
)

// version returns the version obj gets: its spec.version, or the
// ProviderConfig's default. A version the ProviderConfig does not offer is
// invalid user input: retrying cannot fix it, the tenant (or the platform
// operator) has to.
func version(obj *apiv1alpha1.Sample, cfg *apiv1alpha1.ProviderConfig) (string, error) {
	offered := cfg.Spec.Versions
	if len(offered) == 0 {
		return "", spruntime.InvalidUserInput(ReasonUnsupportedVersion, "the ProviderConfig %q offers no versions; the platform operator has to add some to spec.versions", cfg.Name)
	}
	if obj.Spec.Version == "" {
		return offered[0], nil
	}
	for _, v := range offered {
		if v == obj.Spec.Version {
			return v, nil
		}
	}
	return "", spruntime.InvalidUserInput(ReasonUnsupportedVersion, "spec.version %q is not offered; choose one of: %s", obj.Spec.Version, strings.Join(offered, ", "))
}

// desiredCRD returns the DomainServiceAPI's CRD for the provider
// providerName and the domain service's version.
func desiredCRD(providerName, version string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:        DomainCRDName,
			Labels:      map[string]string{ManagedByLabel: providerName},
			Annotations: map[string]string{VersionAnnotation: version},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: DomainGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind:     DomainKind,
				ListKind: DomainKind + "List",
				Plural:   DomainPlural,
				Singular: strings.ToLower(DomainKind),
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:    DomainVersion,
				Served:  true,
				Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:        "object",
					Description: DomainKind + " is an object of the domain service, created by the tenant in their MCP cluster.",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", XPreserveUnknownFields: ptr.To(true)},
						"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					},
				}},
			}},
		},
	}
}

// applyCRD makes crd (as read from the cluster, or new) what want says,
// leaving alone what the API server or others set.
func applyCRD(crd, want *apiextensionsv1.CustomResourceDefinition) {
	crd.Labels = merge(crd.Labels, want.Labels)
	crd.Annotations = merge(crd.Annotations, want.Annotations)
	crd.Spec.Group = want.Spec.Group
	crd.Spec.Names = want.Spec.Names
	crd.Spec.Scope = want.Spec.Scope
	crd.Spec.Versions = want.Spec.Versions
}

// crdDiff says how got differs from want in what applyCRD sets, or "" when
// it does not.
func crdDiff(want, got *apiextensionsv1.CustomResourceDefinition) string {
	var diffs []string
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			diffs = append(diffs, fmt.Sprintf("label %s is %q, want %q", k, got.Labels[k], v))
		}
	}
	for k, v := range want.Annotations {
		if got.Annotations[k] != v {
			diffs = append(diffs, fmt.Sprintf("annotation %s is %q, want %q", k, got.Annotations[k], v))
		}
	}
	if got.Spec.Group != want.Spec.Group || got.Spec.Scope != want.Spec.Scope || !equality.Semantic.DeepEqual(got.Spec.Names, want.Spec.Names) {
		diffs = append(diffs, "group, scope or names changed")
	}
	if !equality.Semantic.DeepEqual(got.Spec.Versions, want.Spec.Versions) {
		diffs = append(diffs, "versions or schema changed")
	}
	return strings.Join(diffs, "; ")
}

// established reports whether the API server serves crd.
func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// merge returns dst with the entries of src added.
func merge(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// WorkloadNamespace is the namespace in the workload cluster that belongs to
// obj. Objects of the same name in different onboarding namespaces share
// the workload cluster, so the name hashes both.
func WorkloadNamespace(obj *apiv1alpha1.Sample) string {
	sum := sha256.Sum256([]byte(obj.Namespace + "/" + obj.Name))
	prefix := "sample"
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:16]
}
