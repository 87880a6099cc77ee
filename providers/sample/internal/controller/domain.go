package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
	// ManagedByLabel names the provider that manages an object. The
	// provider changes and deletes only objects that carry its name here
	// (and, in the shared workload cluster, the object's UID).
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// VersionAnnotation records the version of the domain service (the
	// Sample's spec.version, or the ProviderConfig's default).
	VersionAnnotation = "sample.services.openmcp.cloud/version"
	// OwnerAnnotation records the Sample ("namespace/name") a workload
	// namespace or server belongs to, for people; OwnerUIDLabel decides.
	OwnerAnnotation = "sample.services.openmcp.cloud/owner"
	// OwnerUIDLabel holds the UID of the Sample a workload namespace or
	// server belongs to. The API server assigns UIDs and nobody can choose
	// one, so a namespace or Deployment with the name the provider
	// computes, but without the object's UID (an orphaned object's of the
	// same name, another provider's), is never taken over or deleted.
	OwnerUIDLabel = "sample.services.openmcp.cloud/owner-uid"
	// NameLabel and InstanceLabel select the pods of a Sample's server:
	// the server's name and the Sample it serves (its ServerName).
	NameLabel     = "app.kubernetes.io/name"
	InstanceLabel = "app.kubernetes.io/instance"
)

// The domain service's server, which runs in the shared workload cluster
// when the ProviderConfig sets spec.workload.
const (
	// ServerNamespace is the namespace in the workload cluster that holds
	// the server Deployments of every Sample. One namespace, not the
	// Sample's own, because the provider's rights in the workload cluster
	// are fixed when it starts: a Role in this namespace lets it manage
	// Deployments here and nowhere else, which the default access policy
	// allows (a ClusterRole on Deployments it does not).
	ServerNamespace = "sample-servers"
	// ServerContainer is the name of the server's container.
	ServerContainer = "server"
	// ServerAppName is the server's NameLabel.
	ServerAppName = "sample-server"
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
	// ReasonCRDConflict: the DomainServiceAPI's CRD exists in the MCP
	// cluster and this provider does not manage it (ManagedByLabel): it is
	// never taken over or deleted (invalid user input).
	ReasonCRDConflict = "CRDConflict"
	// ReasonWorkloadConflict: the object's namespace or server Deployment
	// exists in the workload cluster and is not the object's
	// (OwnerUIDLabel): it is never taken over or deleted (invalid user
	// input).
	ReasonWorkloadConflict = "WorkloadConflict"
	// ReasonWorkloadNotReady: the server Deployment (ProviderConfig
	// spec.workload) is not Available yet; the message says how many of
	// its replicas are.
	ReasonWorkloadNotReady = "WorkloadNotReady"
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

// managedBy reports whether o carries the ManagedByLabel of the provider
// providerName.
func managedBy(o metav1.Object, providerName string) bool {
	return o.GetLabels()[ManagedByLabel] == providerName
}

// crdConflict is the error of a DomainServiceAPI CRD in the MCP cluster
// that this provider does not manage: another provider's, or the
// tenant's own.
func crdConflict(name string) error {
	return spruntime.InvalidUserInput(ReasonCRDConflict, "CRD %s in the MCP cluster is not managed by this provider (label %s); it is never taken over or deleted: delete it first if it is not needed", name, ManagedByLabel)
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
	diffs := metadataDiffs(want, got)
	if got.Spec.Group != want.Spec.Group || got.Spec.Scope != want.Spec.Scope || !equality.Semantic.DeepEqual(got.Spec.Names, want.Spec.Names) {
		diffs = append(diffs, "group, scope or names changed")
	}
	if !equality.Semantic.DeepEqual(got.Spec.Versions, want.Spec.Versions) {
		diffs = append(diffs, "versions or schema changed")
	}
	return strings.Join(diffs, "; ")
}

// metadataDiffs says which of want's labels and annotations got lacks or
// has with another value.
func metadataDiffs(want, got metav1.Object) []string {
	var diffs []string
	for k, v := range want.GetLabels() {
		if got.GetLabels()[k] != v {
			diffs = append(diffs, fmt.Sprintf("label %s is %q, want %q", k, got.GetLabels()[k], v))
		}
	}
	for k, v := range want.GetAnnotations() {
		if got.GetAnnotations()[k] != v {
			diffs = append(diffs, fmt.Sprintf("annotation %s is %q, want %q", k, got.GetAnnotations()[k], v))
		}
	}
	return diffs
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
// obj of the provider providerName. The workload cluster is shared: with
// objects of the same name in other onboarding namespaces, and with other
// providers, whose kinds may have the same name; so the name hashes the
// provider, the group and kind, and the object's namespace and name. A
// name proves nothing, though: OwnerUIDLabel says whose a namespace is.
func WorkloadNamespace(providerName string, obj *apiv1alpha1.Sample) string {
	id := strings.Join([]string{providerName, apiv1alpha1.GroupVersion.Group, "Sample", obj.Namespace, obj.Name}, "/")
	sum := sha256.Sum256([]byte(id))
	prefix := "sample"
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:16]
}

// ServerName is the name of obj's server Deployment in ServerNamespace:
// unique per provider and Sample like its WorkloadNamespace, whose name it
// shares.
func ServerName(providerName string, obj *apiv1alpha1.Sample) string {
	return WorkloadNamespace(providerName, obj)
}

// ownerLabels are the labels that make a namespace or Deployment in the
// workload cluster obj's.
func ownerLabels(providerName string, obj *apiv1alpha1.Sample) map[string]string {
	return map[string]string{ManagedByLabel: providerName, OwnerUIDLabel: string(obj.UID)}
}

// ownedBy reports whether o, in the workload cluster, is obj's: it carries
// the provider's ManagedByLabel and obj's UID.
func ownedBy(o metav1.Object, providerName string, obj *apiv1alpha1.Sample) bool {
	l := o.GetLabels()
	return l[ManagedByLabel] == providerName && obj.UID != "" && l[OwnerUIDLabel] == string(obj.UID)
}

// workloadConflict is the error of a namespace or Deployment in the
// workload cluster that has the name obj's would have but is not obj's.
func workloadConflict(what string) error {
	return spruntime.InvalidUserInput(ReasonWorkloadConflict, "%s in the workload cluster exists and belongs to another object (one deleted with the Orphan policy, or another provider's); it is never taken over or deleted", what)
}

// serverReplicas is how many replicas w asks for: one when unset.
func serverReplicas(w *apiv1alpha1.Workload) int32 {
	if w.Replicas == nil {
		return 1
	}
	return *w.Replicas
}

// pullSecretRefs are the copies of refs in target that a server's pods
// reference, in the order of refs and each once: what PullSecrets.Sync
// returns.
func pullSecretRefs(target spruntime.PullSecretTarget, refs []corev1.LocalObjectReference) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, ref := range refs {
		c := corev1.LocalObjectReference{Name: target.Prefix + ref.Name}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// desiredServer returns obj's server Deployment as the provider
// providerName runs it for w, its pods pulling with pullSecrets (copies
// in ServerNamespace).
func desiredServer(providerName string, obj *apiv1alpha1.Sample, w *apiv1alpha1.Workload, pullSecrets []corev1.LocalObjectReference) *appsv1.Deployment {
	selector := map[string]string{NameLabel: ServerAppName, InstanceLabel: ServerName(providerName, obj)}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ServerName(providerName, obj),
			Namespace:   ServerNamespace,
			Labels:      merge(ownerLabels(providerName, obj), selector),
			Annotations: map[string]string{OwnerAnnotation: obj.Namespace + "/" + obj.Name},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(serverReplicas(w)),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: merge(nil, selector)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  ServerContainer,
						Image: w.Image,
					}},
					ImagePullSecrets: pullSecrets,
				},
			},
		},
	}
}

// applyServer makes d (as read from the cluster, or new) what want says,
// leaving alone what the API server defaults or others set.
func applyServer(d, want *appsv1.Deployment) {
	d.Labels = merge(d.Labels, want.Labels)
	d.Annotations = merge(d.Annotations, want.Annotations)
	d.Spec.Replicas = ptr.To(*want.Spec.Replicas)
	if d.Spec.Selector == nil {
		// Immutable once created.
		d.Spec.Selector = want.Spec.Selector.DeepCopy()
	}
	d.Spec.Template.Labels = merge(d.Spec.Template.Labels, want.Spec.Template.Labels)
	d.Spec.Template.Spec.ImagePullSecrets = slices.Clone(want.Spec.Template.Spec.ImagePullSecrets)
	containers := d.Spec.Template.Spec.Containers
	if len(containers) == 1 && containers[0].Name == ServerContainer {
		containers[0].Image = want.Spec.Template.Spec.Containers[0].Image
		return
	}
	d.Spec.Template.Spec.Containers = want.Spec.Template.Spec.DeepCopy().Containers
}

// serverDiff says how got differs from want in what applyServer sets, or
// "" when it does not.
func serverDiff(want, got *appsv1.Deployment) string {
	diffs := metadataDiffs(want, got)
	if got.Spec.Replicas == nil || *got.Spec.Replicas != *want.Spec.Replicas {
		diffs = append(diffs, fmt.Sprintf("replicas are %s, want %d", replicasText(got.Spec.Replicas), *want.Spec.Replicas))
	}
	for k, v := range want.Spec.Template.Labels {
		if got.Spec.Template.Labels[k] != v {
			diffs = append(diffs, fmt.Sprintf("pod label %s is %q, want %q", k, got.Spec.Template.Labels[k], v))
		}
	}
	if got, want := got.Spec.Template.Spec.ImagePullSecrets, want.Spec.Template.Spec.ImagePullSecrets; !slices.Equal(got, want) {
		diffs = append(diffs, fmt.Sprintf("image pull secrets are %v, want %v", names(got), names(want)))
	}
	image := want.Spec.Template.Spec.Containers[0].Image
	if c := got.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Name != ServerContainer || c[0].Image != image {
		diffs = append(diffs, fmt.Sprintf("want one container %s with image %s", ServerContainer, image))
	}
	return strings.Join(diffs, "; ")
}

// names lists the names of refs, for a message.
func names(refs []corev1.LocalObjectReference) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.Name)
	}
	return out
}

// replicasText renders a Deployment's spec.replicas for a message.
func replicasText(r *int32) string {
	if r == nil {
		return "unset"
	}
	return fmt.Sprint(*r)
}

// serverAvailable reports whether the Deployment d serves with all of its
// replicas: the deployment controller has seen its current spec, reports
// it Available, and as many updated and available replicas as it wants.
// Otherwise the message says how far it is, for the Ready condition.
func serverAvailable(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	available := false
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			available = c.Status == corev1.ConditionTrue
		}
	}
	if st.ObservedGeneration >= d.Generation && available && st.UpdatedReplicas >= want && st.AvailableReplicas >= want {
		return true, ""
	}
	return false, fmt.Sprintf("Deployment %s/%s in the workload cluster has %d of %d replicas available", d.Namespace, d.Name, st.AvailableReplicas, want)
}
