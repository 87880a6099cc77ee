package sisters

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/replicate"
	"github.com/marketplane/marketplane/pkg/providerapp"
)

// Names of what the Reconciler installs on a sister. They are fixed: a
// sister runs one provisioner, whose inter-operator serves every replica
// there.
const (
	// ProviderName is the provider name of the sister's inter-operator,
	// the name of its ProviderConfig.
	ProviderName = "marketplane-sister"
	// Name names the ServiceAccount, the Deployment, the ClusterRole and
	// the Roles and bindings.
	Name = "marketplane-sister-interoperator"
	// KubeconfigSecretName is the Secret in the catalog namespace holding
	// the master's kubeconfig of the sister, which the SFCluster "1"
	// names.
	KubeconfigSecretName = "marketplane-sister-kubeconfig"
	// Container is the name of the Deployment's container.
	Container = "interoperator"
)

// LabelProvisioner marks what the Reconciler installed on a sister (value
// "true"); replicate.LabelMaster says for which master.
const LabelProvisioner = "interoperator.marketplane.io/sister-provisioner"

// DefaultEnvironment is the sister's --environment when the master runs
// without one (the contract requires a name).
const DefaultEnvironment = "default"

// spec is what the master wants on one sister.
type spec struct {
	master      string
	environment string
	catalog     string
	namespace   string
	cfg         *interoperatorv1alpha1.ProviderConfig
	kubeconfig  []byte
	// pullSecrets are the master's image pull Secrets to copy.
	pullSecrets  []*corev1.Secret
	clusterRules []rbacv1.PolicyRule
	catalogRules []rbacv1.PolicyRule
}

// labels are the labels of every installed object.
func (s spec) labels() map[string]string {
	return map[string]string{LabelProvisioner: "true", replicate.LabelMaster: s.master}
}

func (s spec) meta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: s.labels()}
}

// args are the sister's run arguments: the provisioner's contract flags,
// its onboarding cluster being its platform cluster.
func (s spec) args() []string {
	env := s.environment
	if env == "" {
		env = DefaultEnvironment
	}
	args := []string{"run", "--provider-name", ProviderName, "--environment", env, "--" + providerapp.FlagOnboardingIsPlatform}
	if s.replicas() > 1 {
		args = append(args, "--leader-elect")
	}
	return args
}

func (s spec) replicas() int32 {
	if r := s.cfg.Spec.SisterProvisioner.Replicas; r != nil && *r > 0 {
		return *r
	}
	return 1
}

// objects returns the objects the Reconciler applies, in order (the
// namespaces aside): the ServiceAccount and its RBAC, the pull Secrets,
// the kubeconfig Secret, the ProviderConfig, the SFCluster "1" and the
// Deployment last, so that it starts with everything in place.
func (s spec) objects() []client.Object {
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: Name, Namespace: s.namespace}
	catalogRules := append(slices.Clone(s.catalogRules), rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{KubeconfigSecretName}, Verbs: []string{"get"},
	})
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: s.meta(s.namespace, Name)},
		&rbacv1.ClusterRole{ObjectMeta: s.meta("", Name), Rules: slices.Clone(s.clusterRules)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: s.meta("", Name), Subjects: []rbacv1.Subject{sa},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: Name}},
		&rbacv1.Role{ObjectMeta: s.meta(s.catalog, Name), Rules: catalogRules},
		&rbacv1.RoleBinding{ObjectMeta: s.meta(s.catalog, Name), Subjects: []rbacv1.Subject{sa},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: Name}},
		// Leader election with more than one replica.
		&rbacv1.Role{ObjectMeta: s.meta(s.namespace, Name), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: s.meta(s.namespace, Name), Subjects: []rbacv1.Subject{sa},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: Name}},
	}
	for _, p := range s.pullSecrets {
		objs = append(objs, &corev1.Secret{ObjectMeta: s.meta(s.namespace, p.Name), Type: p.Type, Data: maps.Clone(p.Data)})
	}
	objs = append(objs,
		&corev1.Secret{ObjectMeta: s.meta(s.catalog, KubeconfigSecretName), Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{resourcev1alpha1.KubeconfigSecretKey: s.kubeconfig}},
		s.providerConfig(),
		&resourcev1alpha1.SFCluster{ObjectMeta: s.meta(s.catalog, resourcev1alpha1.PrimaryClusterID),
			Spec: resourcev1alpha1.SFClusterSpec{SecretRef: KubeconfigSecretName}},
		s.deployment(),
	)
	return objs
}

// providerConfig is the sister's ProviderConfig: the master's catalog
// namespace and what bounds and widens its renders.
func (s spec) providerConfig() *interoperatorv1alpha1.ProviderConfig {
	m := s.cfg.Spec
	out := &interoperatorv1alpha1.ProviderConfig{ObjectMeta: s.meta("", ProviderName), Spec: interoperatorv1alpha1.ProviderConfigSpec{
		CatalogNamespace: s.catalog,
		PollInterval:     m.PollInterval,
		Limits:           m.Limits,
		RenderPolicies:   m.RenderPolicies,
	}}
	return out.DeepCopy()
}

// deployment runs the image with the contract's POD_* variables from the
// downward API, as the provider operator runs providers.
func (s spec) deployment() *appsv1.Deployment {
	selector := map[string]string{LabelProvisioner: "true", "app.kubernetes.io/name": Name}
	podLabels := maps.Clone(s.labels())
	maps.Copy(podLabels, selector)
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
	}
	var pull []corev1.LocalObjectReference
	for _, p := range s.pullSecrets {
		pull = append(pull, corev1.LocalObjectReference{Name: p.Name})
	}
	return &appsv1.Deployment{
		ObjectMeta: s.meta(s.namespace, Name),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(s.replicas()),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: Name,
					ImagePullSecrets:   pull,
					// The root file system is read-only; /tmp is the only
					// writable place, as in the chart's Deployments.
					Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  Container,
						Image: s.cfg.Spec.SisterProvisioner.Image,
						Args:  s.args(),
						Env: []corev1.EnvVar{
							field(providerv1alpha1.EnvPodName, "metadata.name"),
							field(providerv1alpha1.EnvPodNamespace, "metadata.namespace"),
							field(providerv1alpha1.EnvPodIP, "status.podIP"),
							field(providerv1alpha1.EnvPodServiceAccountName, "spec.serviceAccountName"),
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts:             []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}
}
