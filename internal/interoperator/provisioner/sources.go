package provisioner

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/apply"
)

// placement is what decides where an operation reads its sources: the
// instance's default namespace, the objects the instance (and, for a
// binding's operation, the binding) applied, and whether the operation's
// own objects are applied yet (its status is being evaluated).
type placement struct {
	namespace string
	applied   []osbv1alpha1.Source
	settled   bool
}

// place returns where the namespaced source ref is read. Service Fabrik
// applies every rendered object to the instance's namespace and reads
// every source from there, whatever namespace the sources template names
// (its docker sample names "default"). So when the operation applied an
// object of ref's group, kind and name to the default namespace, and none
// to the namespace ref names, ref is read from the default namespace,
// which is always the instance's. Otherwise ref stays as named, and the
// source policy decides.
func (p placement) place(ref osbv1alpha1.Source) osbv1alpha1.Source {
	if ref.Namespace == p.namespace {
		return ref
	}
	inDefault := false
	for _, a := range p.applied {
		if !sameObject(a, ref) {
			continue
		}
		switch a.Namespace {
		case ref.Namespace:
			return ref
		case p.namespace:
			inDefault = true
		}
	}
	if inDefault {
		ref.Namespace = p.namespace
	}
	return ref
}

// appliedInto reports whether the operation applied an object to the
// namespace ns, or the Namespace ns itself.
func (p placement) appliedInto(ns string) bool {
	for _, a := range p.applied {
		if a.Namespace == ns || a.Kind == "Namespace" && a.APIVersion == "v1" && a.Name == ns {
			return true
		}
	}
	return false
}

// missingNamespace is the refusal of ref, a source in a namespace that does
// not exist and that the policy does not grant, once the operation's
// objects are applied: the instance did not create the namespace, and one
// that someone else creates is not the instance's, so the source could
// never be read and the operation would wait forever.
func (p placement) missingNamespace(ref osbv1alpha1.Source) *apply.RefusedError {
	return &apply.RefusedError{Ref: ref, Rule: apply.RuleOwnSources, Problem: fmt.Sprintf(
		"namespace %s does not exist, the instance did not create it, and the ProviderConfig's renderPolicies do not grant it to the plan, so the source can never be read; %s",
		ref.Namespace, p.hint())}
}

// hint tells plan authors where sources are read, for refusals of a
// source's namespace.
func (p placement) hint() string {
	return fmt.Sprintf("a source without a namespace is read from the instance's namespace %s, where objects rendered without one are applied (Service Fabrik reads every source from there)", p.namespace)
}

// sameObject reports whether a and b name the same object, apart from the
// namespace: the same group, kind and name (the version may differ).
func sameObject(a, b osbv1alpha1.Source) bool {
	return a.Name == b.Name && a.Kind == b.Kind && groupOf(a.APIVersion) == groupOf(b.APIVersion)
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return apiVersion
	}
	return gv.Group
}
